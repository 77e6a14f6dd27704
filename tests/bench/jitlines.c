// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/* Where each source line of a loaded BPF program starts in its JIT image: one line per line
 * record, "TAG OFFSET FILE:LINE SOURCE" (OFFSET in hex from the program's start, what perf prints
 * as bpf_prog_TAG_NAME+OFFSET). With it, samples that perf attributes to a JIT'd program can
 * be put on the source lines that take the time without a perf or bpftool built with libbfd
 * (neither is, on Debian 12). tests/bench/pktprof.sh uses it.
 *   build/bench/jitlines NAME...   (the newest loaded program of each name) */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <bpf/bpf.h>
#include <bpf/btf.h>

static int dump(int fd)
{
	struct bpf_prog_info info = { 0 };
	__u32 len = sizeof(info), nl, njl, nks;
	struct bpf_line_info *li;
	struct btf *btf = NULL;
	char tag[17];
	__u64 *jl, *ks;

	if (bpf_obj_get_info_by_fd(fd, &info, &len))
		return -1;
	nl = info.nr_line_info;
	njl = info.nr_jited_line_info;
	nks = info.nr_jited_ksyms;
	for (int i = 0; i < 8; i++)
		snprintf(tag + 2 * i, 3, "%02x", info.tag[i]);
	li = calloc(nl ? nl : 1, sizeof(*li));
	jl = calloc(njl ? njl : 1, sizeof(*jl));
	ks = calloc(nks ? nks : 1, sizeof(*ks));
	if (!li || !jl || !ks)
		return -1;
	if (info.btf_id)
		btf = btf__load_from_kernel_by_id(info.btf_id);
	memset(&info, 0, sizeof(info));
	info.nr_line_info = nl;
	info.line_info_rec_size = sizeof(*li);
	info.line_info = (unsigned long)li;
	info.nr_jited_line_info = njl;
	info.jited_line_info_rec_size = sizeof(*jl);
	info.jited_line_info = (unsigned long)jl;
	info.nr_jited_ksyms = nks;
	info.jited_ksyms = (unsigned long)ks;
	len = sizeof(info);
	if (bpf_obj_get_info_by_fd(fd, &info, &len) || !nks)
		return -1;
	/* The main program's image starts at the first ksym; subprograms' records (at other
	 * addresses) come out with offsets beyond it or below it, and pktprof.sh keeps only
	 * the ones inside the program it looks at. */
	for (__u32 i = 0; i < nl && i < njl; i++) {
		const char *s = btf ? btf__name_by_offset(btf, li[i].line_off) : NULL;
		const char *f = btf ? btf__name_by_offset(btf, li[i].file_name_off) : NULL;
		const char *base = f && strrchr(f, '/') ? strrchr(f, '/') + 1 : f;

		printf("%s %llx %s:%u %s\n", tag, (unsigned long long)(jl[i] - ks[0]),
		       base && *base ? base : "?", BPF_LINE_INFO_LINE_NUM(li[i].line_col), s ? s : "");
	}
	btf__free(btf);
	free(li);
	free(jl);
	free(ks);
	return 0;
}

int main(int argc, char **argv)
{
	int rc = 0;

	for (int a = 1; a < argc; a++) {
		__u32 id = 0, best = 0;

		while (bpf_prog_get_next_id(id, &id) == 0) {
			struct bpf_prog_info info = { 0 };
			__u32 len = sizeof(info);
			int fd = bpf_prog_get_fd_by_id(id);

			if (fd < 0)
				continue;
			/* the kernel keeps the first 15 characters of a name */
			if (!bpf_obj_get_info_by_fd(fd, &info, &len) &&
			    !strncmp(info.name, argv[a], sizeof(info.name) - 1))
				best = id;
			close(fd);
		}
		if (!best) {
			fprintf(stderr, "jitlines: no loaded program named %s\n", argv[a]);
			rc = 1;
			continue;
		}
		int fd = bpf_prog_get_fd_by_id(best);

		if (fd < 0 || dump(fd)) {
			fprintf(stderr, "jitlines: cannot read program %u (%s)\n", best, argv[a]);
			rc = 1;
		}
		if (fd >= 0)
			close(fd);
	}
	return rc;
}
