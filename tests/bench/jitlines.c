// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/* Where each source line of a loaded BPF program starts in its JIT image: one line per line
 * record, "TAG OFFSET FILE:LINE SOURCE" (OFFSET in hex from the start of the function the line
 * is in, TAG that function's: what perf prints as bpf_prog_TAG_NAME+OFFSET, for the program and
 * for each of its subprograms, global functions and bpf_loop callbacks alike). With it, samples that perf attributes to a JIT'd program can
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
	__u32 len = sizeof(info), nl, njl, nks, nfl, ntags, *fl;
	struct bpf_line_info *li;
	struct btf *btf = NULL;
	__u8 (*tags)[BPF_TAG_SIZE];
	__u64 *jl, *ks;

	if (bpf_obj_get_info_by_fd(fd, &info, &len))
		return -1;
	nl = info.nr_line_info;
	njl = info.nr_jited_line_info;
	nks = info.nr_jited_ksyms;
	nfl = info.nr_jited_func_lens;
	ntags = info.nr_prog_tags;
	li = calloc(nl ? nl : 1, sizeof(*li));
	jl = calloc(njl ? njl : 1, sizeof(*jl));
	ks = calloc(nks ? nks : 1, sizeof(*ks));
	fl = calloc(nfl ? nfl : 1, sizeof(*fl));
	tags = calloc(ntags ? ntags : 1, sizeof(*tags));
	if (!li || !jl || !ks || !fl || !tags)
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
	info.nr_jited_func_lens = nfl;
	info.jited_func_lens = (unsigned long)fl;
	info.nr_prog_tags = ntags;
	info.prog_tags = (unsigned long)tags;
	len = sizeof(info);
	if (bpf_obj_get_info_by_fd(fd, &info, &len) || !nks || nfl != nks || ntags != nks)
		return -1;
	/* Each line record's address is in one function's image: ksym k, func_len k long. */
	for (__u32 i = 0; i < nl && i < njl; i++) {
		const char *s = btf ? btf__name_by_offset(btf, li[i].line_off) : NULL;
		const char *f = btf ? btf__name_by_offset(btf, li[i].file_name_off) : NULL;
		const char *base = f && strrchr(f, '/') ? strrchr(f, '/') + 1 : f;
		char tag[2 * BPF_TAG_SIZE + 1];
		__u32 k = 0;

		while (k < nks && !(jl[i] >= ks[k] && jl[i] < ks[k] + fl[k]))
			k++;
		if (k == nks)
			continue;
		/* The program's own image is named twice in kallsyms: by its first function's tag
		 * and by the program's (info.tag), which is the name perf shows when the program
		 * has subprograms: its lines go under both. */
		for (int t = 0; t < (k == 0 && memcmp(info.tag, tags[0], BPF_TAG_SIZE) ? 2 : 1); t++) {
			for (int b = 0; b < BPF_TAG_SIZE; b++)
				snprintf(tag + 2 * b, 3, "%02x", t ? info.tag[b] : tags[k][b]);
			printf("%s %llx %s:%u %s\n", tag, (unsigned long long)(jl[i] - ks[k]),
			       base && *base ? base : "?", BPF_LINE_INFO_LINE_NUM(li[i].line_col),
			       s ? s : "");
		}
	}
	btf__free(btf);
	free(li);
	free(jl);
	free(ks);
	free(fl);
	free(tags);
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
