#!/bin/sh
# Bundles allot's programs with the shared libraries they need beyond the C
# library, for running tests/gpu/run.sh on a GPU machine of another
# distribution that lacks allot's build dependencies (libjansson,
# libmicrohttpd, libcurl, libsqlite3, libpq, libsodium, libyaml):
#
#   tests/gpu/bundle.sh DIR        (after building into build/ or BUILD=...)
#   BUILD=DIR/bin tests/gpu/run.sh (on the GPU machine)
#
# DIR/bin holds one small wrapper per program that puts DIR/lib first in
# the loader's path and runs the program from DIR/real, and the shim
# itself (it needs only the C library). The C library, the loader and
# their companions are left out: the GPU machine's own are used.
set -eu
[ $# -eq 1 ] || { echo "usage: tests/gpu/bundle.sh DIR" >&2; exit 2; }
cd "$(dirname "$0")/../.."
BUILD=${BUILD:-build}
DIR=$1
rm -rf "$DIR"
mkdir -p "$DIR/bin" "$DIR/lib" "$DIR/real"
DIR=$(cd "$DIR" && pwd)
for p in allotd allot allot-agent; do
    [ -x "$BUILD/$p" ] || { echo "bundle.sh: $BUILD/$p is not built" >&2; exit 1; }
    cp "$BUILD/$p" "$DIR/real/$p"
    ldd "$BUILD/$p" | awk '$3 ~ /^\// {print $3}' | while read -r lib; do
        case $(basename "$lib") in
        libc.so.* | libm.so.* | ld-linux* | libresolv.so.* | libpthread.so.* | libdl.so.* | \
            librt.so.*) ;;
        *) cp -L "$lib" "$DIR/lib/" ;;
        esac
    done
    # relative to the wrapper, so that DIR can travel
    cat > "$DIR/bin/$p" <<WRAP
#!/bin/sh
d=\$(cd "\$(dirname "\$0")/.." && pwd)
LD_LIBRARY_PATH=\$d/lib\${LD_LIBRARY_PATH:+:\$LD_LIBRARY_PATH} exec "\$d/real/$p" "\$@"
WRAP
    chmod 755 "$DIR/bin/$p"
done
cp "$BUILD/liballot-cuda.so" "$DIR/bin/"
echo "bundle.sh: $(ls "$DIR/lib" | wc -l) libraries, $(du -sh "$DIR" | cut -f1) in $DIR"
