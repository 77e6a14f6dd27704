/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* Test helper: a pipe or socket pair nobody reads, as a reader that fell behind leaves it. */
#ifndef SLUICE_TEST_FILLFD_H
#define SLUICE_TEST_FILLFD_H

#include <fcntl.h>
#include <string.h>
#include <unistd.h>

/* Fill the write side fd until it takes no more, then give it back blocking, as sluiced's
 * stdout and stderr are. */
static void fill(int fd)
{
	char junk[4096];
	int fl = fcntl(fd, F_GETFL);

	memset(junk, 'x', sizeof(junk));
	fcntl(fd, F_SETFL, fl | O_NONBLOCK);
	while (write(fd, junk, sizeof(junk)) > 0)
		;
	fcntl(fd, F_SETFL, fl);
}

#endif
