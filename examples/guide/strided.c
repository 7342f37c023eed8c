/* Strided views: a column block of a row-major matrix written and read as
 * one call each, and a failed strided write that taints exactly the block:
 * a row read is refused naming the block's bytes of that row, a read of the
 * columns beside it succeeds, and writing the block again repairs it. */
#include <cubert/cubert.h>
#include <cubert/faultinj.h>
#include <stdio.h>

enum { ROWS = 1000, COLS = 8 };

static int check(cubert_status st, const char *what) {
  if (st == CUBERT_OK) return 0;
  fprintf(stderr, "%s: %s: %s\n", what, cubert_status_name(st), cubert_last_error_message());
  return 1;
}

int main(void) {
  cubert_runtime_options options;
  cubert_runtime_options_init(&options);
  options.backends = "host";
  options.host_memory = 64u << 20;
  cubert_runtime *rt = NULL;
  if (check(cubert_runtime_create(&options, &rt), "runtime")) return 1;
  cubert_client *c = NULL;
  cubert_handle *m = NULL, *row = NULL;
  int rc = 1;
  static float matrix[ROWS * COLS], block[ROWS * 2];
  if (check(cubert_client_create(rt, 0, &c), "client") ||
      check(cubert_handle_create(c, matrix, sizeof matrix, &m), "create"))
    goto out;

  /* Columns 3 and 4 of every row: 2 dimensions, strides in elements. */
  cubert_view cols = {.ndims = 2, .elem_size = sizeof(float), .offset = 3, .shape = {ROWS, 2}, .strides = {COLS, 1}};
  for (int i = 0; i < ROWS * 2; i++) block[i] = (float)i;
  if (check(cubert_handle_write_strided(c, m, &cols, block, sizeof block), "write block")) goto out;

  /* The same write, failed by a fault rule: the block is tainted, nothing else. */
  cubert_faultinj_diag diag;
  if (check(cubert_faultinj_add(rt, "write times=1 fault=fail", "guide", NULL, &diag), "rule")) goto out;
  if (cubert_handle_write_strided(c, m, &cols, block, sizeof block) == CUBERT_OK) goto out;

  /* Row 7 is refused, and the error names bytes 236..244: columns 3..5 of row 7. */
  float r7[COLS];
  if (check(cubert_handle_slice(m, 7 * COLS * sizeof(float), (ROWS - 8) * COLS * sizeof(float), &row), "slice"))
    goto out;
  cubert_status st = cubert_handle_read(c, row, r7, sizeof r7);
  uint64_t start = 0, end = 0;
  if (st == CUBERT_ERR_TAINTED) {
    cubert_error *e = cubert_last_error(); /* a reference: release it */
    cubert_error_failure(e, 0, &start, &end);
    cubert_error_release(e);
  }
  printf("row 7: %s, tainted bytes %llu..%llu\n", cubert_status_name(st), (unsigned long long)start,
         (unsigned long long)end);

  /* Column 5, right beside the block, reads fine. */
  static float col5[ROWS];
  cubert_view five = {.ndims = 1, .elem_size = sizeof(float), .offset = 5, .shape = {ROWS}, .strides = {COLS}};
  cubert_status beside = cubert_handle_read_strided(c, m, &five, col5, sizeof col5);
  printf("column 5: %s\n", cubert_status_name(beside));

  /* Writing the block again repairs it. */
  if (check(cubert_handle_write_strided(c, m, &cols, block, sizeof block), "rewrite") ||
      check(cubert_handle_read(c, row, r7, sizeof r7), "row 7 again"))
    goto out;
  printf("row 7 after the rewrite: %.0f %.0f\n", r7[3], r7[4]);
  rc = st == CUBERT_ERR_TAINTED && start == 236 && end == 244 && beside == CUBERT_OK && r7[3] == 14.0f ? 0 : 1;
out:
  cubert_handle_release(row);
  cubert_handle_release(m);
  if (c) cubert_client_destroy(c);
  cubert_runtime_destroy(rt);
  return rc;
}
