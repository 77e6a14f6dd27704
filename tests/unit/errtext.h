/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* Test helper: a YAML file's errors as an operator reads them. Include after cmocka.h. */
#ifndef SLUICE_TEST_ERRTEXT_H
#define SLUICE_TEST_ERRTEXT_H

#include <stdio.h>
#include "common/yamldoc.h"

/* errs as doc_errors_print() writes them, in a string to free. */
static char *errors_text(const struct doc_errors *errs)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *out = open_memstream(&buf, &len);

	assert_non_null(out);
	doc_errors_print(out, errs);
	fclose(out);
	assert_non_null(buf);
	return buf;
}

#endif
