/* tests/test_topology_bad_xml.c: simulated node files that are not whole
 * hwloc XML topologies are refused with the file named and what is wrong,
 * and (under ASan) leave no leak behind: a truncated file is caught before
 * hwloc reads it; a complete file with a bad element inside reaches hwloc
 * 2.9, whose leak on that path is suppressed (tests/lsan.supp says why).
 * hwloc's own XML parser is used (HWLOC_LIBXML_IMPORT=0), the one that
 * leaks; with libxml2 hwloc refuses both files before importing anything. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tests/testutil.h"
#include "topology/host_node.h"

/* Writes `len` bytes of `data` to a new temporary .xml file; its path. */
static char *temp_xml(const char *data, size_t len) {
  char *path = strdup("/tmp/cubert-node-XXXXXX.xml");
  int fd = mkstemps(path, 4);
  ck_assert_int_ge(fd, 0);
  ck_assert_int_eq(write(fd, data, len), (ssize_t)len);
  close(fd);
  return path;
}

static void refused(const char *data, size_t len, const char *want) {
  char *path = temp_xml(data, len);
  char **ids = NULL;
  int n = -1;
  char msg[512] = "";
  ck_assert_int_eq(cb_host_node_bus_ids(path, &ids, &n, msg, sizeof msg), CUBERT_ERR_PARSE);
  ck_assert_msg(strstr(msg, path) != NULL, "message `%s` does not name %s", msg, path);
  ck_assert_msg(strstr(msg, want) != NULL, "message `%s` does not say `%s`", msg, want);
  ck_assert_ptr_null(ids);
  unlink(path);
  free(path);
}

START_TEST(test_truncated_node_files_are_refused_before_hwloc) {
  const cb_embedded_node *node = cb_host_node_find("frontier");
  ck_assert_ptr_nonnull(node);
  /* Cut at many points, inside tags and between them. */
  for (int k = 1; k < 20; k++) {
    size_t len = node->xml_size * (size_t)k / 20;
    refused(node->xml, len, "the file is truncated");
  }
  refused(node->xml, node->xml_size - 2, "the file is truncated");
  /* The whole file, trailing blanks or not, is read. */
  char *path = temp_xml(node->xml, node->xml_size);
  char **ids = NULL;
  int n = 0;
  char msg[512] = "";
  ck_assert_msg(cb_host_node_bus_ids(path, &ids, &n, msg, sizeof msg) == CUBERT_OK, "%s", msg);
  ck_assert_int_gt(n, 0);
  cb_host_node_free(ids, n);
  unlink(path);
  free(path);
}
END_TEST

START_TEST(test_a_bad_element_inside_a_whole_file_is_refused) {
  /* The root closes, but an object's child is cut off inside: hwloc reads
   * it and refuses it (its leak on this path is in tests/lsan.supp). */
  const cb_embedded_node *node = cb_host_node_find("frontier");
  ck_assert_ptr_nonnull(node);
  const char *obj = strstr(node->xml, "<object type=\"Package\"");
  ck_assert_ptr_nonnull(obj);
  size_t head = (size_t)(obj - node->xml) + 40;
  static const char tail[] = "\n</topology>\n";
  char *text = malloc(head + sizeof tail);
  memcpy(text, node->xml, head);
  memcpy(text + head, tail, sizeof tail);
  refused(text, head + sizeof tail - 1, "it must be a well-formed hwloc XML version 2.0 file");
  free(text);
}
END_TEST

static Suite *suite(void) {
  Suite *s = suite_create("topology_bad_xml");
  TCase *t = tcase_create("bad_xml");
  tcase_add_test(t, test_truncated_node_files_are_refused_before_hwloc);
  tcase_add_test(t, test_a_bad_element_inside_a_whole_file_is_refused);
  suite_add_tcase(s, t);
  return s;
}

int main(void) {
  /* hwloc's own XML parser, as on a machine without libhwloc-plugins: the
   * path that leaks in hwloc 2.9 (tests/lsan.supp). Read once by hwloc,
   * before any topology is made. */
  setenv("HWLOC_LIBXML_IMPORT", "0", 1);
  return cb_test_run(suite());
}
