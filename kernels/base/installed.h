/* installed.h: what `make install` puts beside the binaries, found from the running one.
 *
 * An installed tree is PREFIX/bin (allocbench, allocbench_micro), PREFIX/lib/allocbench (the
 * figure scripts, the record hook, the example plugins) and PREFIX/share/allocbench (data a
 * binary reads: the micro-benchmarks' default trace) (CMakeLists.txt, install). A binary finds
 * them from its own path (/proc/self/exe), never from PREFIX as configured, so that a tree
 * works wherever it was put: `make install PREFIX=P`, `DESTDIR=D make install`, a copied
 * tree. A binary of the build tree finds none of them there, and its callers fall back on the
 * source tree it was built from.
 *
 * Thread-safe; nothing is kept between calls.
 */
#ifndef AB_INSTALLED_H
#define AB_INSTALLED_H

#include <stdbool.h>
#include <stddef.h>

/* The file or folder at REL from the folder of the running binary ("../share/allocbench/..."),
 * resolved to an absolute path in out (size bytes), when it exists and can be read; false
 * otherwise, with out "". */
bool ab_installed_find(const char *rel, char *out, size_t size);

#endif
