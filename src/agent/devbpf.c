/*
 * Device rules on cgroup v2: a BPF_PROG_TYPE_CGROUP_DEVICE program, built
 * here instruction by instruction (no compiler, no libbpf), attached to
 * the task's cgroup. It allows character devices of the listed
 * major:minor pairs (any access) and denies everything else, exactly the
 * list cg_device_rules gives the v1 devices controller.
 *
 * The program, with r1 the struct bpf_cgroup_dev_ctx:
 *   r2 = ctx->access_type & 0xffff     the device type
 *   r3 = ctx->major; r4 = ctx->minor
 *   per rule: if r2 != CHAR goto next; if r3 != major goto next;
 *             [if r4 != minor goto next;] r0 = 1; exit
 *   r0 = 0; exit
 */
#include "agent.h"

#include "allot/common.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/bpf.h>
#include <stddef.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#define MAX_INSNS (8 + CG_MAX_DEV_RULES * 5)

static struct bpf_insn insn(unsigned char code, unsigned char dst, unsigned char src, short off,
                            int imm)
{
    struct bpf_insn i;

    memset(&i, 0, sizeof(i));
    i.code = code;
    i.dst_reg = dst & 0xf;
    i.src_reg = src & 0xf;
    i.off = off;
    i.imm = imm;
    return i;
}

#define LDX_W(dst, src, off) insn(BPF_LDX | BPF_W | BPF_MEM, dst, src, off, 0)
#define AND_K(dst, imm)      insn(BPF_ALU64 | BPF_AND | BPF_K, dst, 0, 0, imm)
#define JNE_K(dst, imm, off) insn(BPF_JMP | BPF_JNE | BPF_K, dst, 0, off, imm)
#define MOV_K(dst, imm)      insn(BPF_ALU64 | BPF_MOV | BPF_K, dst, 0, 0, imm)
#define EXIT()               insn(BPF_JMP | BPF_EXIT, 0, 0, 0, 0)

static long sys_bpf(int cmd, union bpf_attr *attr)
{
    return syscall(__NR_bpf, cmd, attr, sizeof(*attr));
}

int devbpf_attach(const char *dir, const struct dev_rule *rules, int n, char *err, size_t errlen)
{
    struct bpf_insn prog[MAX_INSNS];
    union bpf_attr attr;
    char log[4096] = "";
    int k = 0, prog_fd, cg_fd;

    if (n > CG_MAX_DEV_RULES) {
        allot_fmt(err, errlen, "too many device rules");
        return -1;
    }
    prog[k++] = LDX_W(2, 1, offsetof(struct bpf_cgroup_dev_ctx, access_type));
    prog[k++] = AND_K(2, 0xffff);
    prog[k++] = LDX_W(3, 1, offsetof(struct bpf_cgroup_dev_ctx, major));
    prog[k++] = LDX_W(4, 1, offsetof(struct bpf_cgroup_dev_ctx, minor));
    for (int i = 0; i < n; i++) {
        bool any = rules[i].minor < 0;
        short skip = any ? 3 : 4; /* to the next rule: past the rest of this one */

        prog[k++] = JNE_K(2, BPF_DEVCG_DEV_CHAR, skip);
        prog[k++] = JNE_K(3, rules[i].major, (short)(skip - 1));
        if (!any)
            prog[k++] = JNE_K(4, rules[i].minor, 2);
        prog[k++] = MOV_K(0, 1);
        prog[k++] = EXIT();
    }
    prog[k++] = MOV_K(0, 0);
    prog[k++] = EXIT();

    memset(&attr, 0, sizeof(attr));
    attr.prog_type = BPF_PROG_TYPE_CGROUP_DEVICE;
    attr.insns = (unsigned long)prog;
    attr.insn_cnt = (unsigned)k;
    attr.license = (unsigned long)"Apache-2.0";
    attr.log_buf = (unsigned long)log;
    attr.log_size = sizeof(log);
    attr.log_level = 1;
    prog_fd = (int)sys_bpf(BPF_PROG_LOAD, &attr);
    if (prog_fd < 0) {
        allot_fmt(err, errlen, "BPF device program refused: %s%s%.200s", strerror(errno),
                  *log ? ": " : "", log);
        return -1;
    }
    cg_fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (cg_fd < 0) {
        allot_fmt(err, errlen, "%s: %s", dir, strerror(errno));
        close(prog_fd);
        return -1;
    }
    memset(&attr, 0, sizeof(attr));
    attr.target_fd = (unsigned)cg_fd;
    attr.attach_bpf_fd = (unsigned)prog_fd;
    attr.attach_type = BPF_CGROUP_DEVICE;
    if (sys_bpf(BPF_PROG_ATTACH, &attr) < 0) {
        allot_fmt(err, errlen, "cannot attach the device program to %s: %s", dir, strerror(errno));
        close(cg_fd);
        close(prog_fd);
        return -1;
    }
    /* attached, the cgroup holds the program: our descriptors can go */
    close(cg_fd);
    close(prog_fd);
    return 0;
}
