#!/bin/sh
# tests/fail_only_public.sh: the failure travels as a value inside the
# library (issue 12 item 2): only public entry points (functions named
# cubert_*) set the thread's last error through cb_fail; a helper fills a
# cb_errb its caller owns (runtime/internal.h). A macro whose body calls
# cb_fail counts as a call where it is used. Offenders are listed as
# file:line: function. tests/fail_only_public.allow names the exceptions,
# each with its reason; an entry that no longer matches is an error too
# (the list only shrinks).
# Run: sh tests/fail_only_public.sh <repository>
root=${1:-.}
cd "$root" || exit 2
allow=tests/fail_only_public.allow
found=$(for f in $(find base runtime backends topology kernels faultinj lib -name '*.c' 2>/dev/null | sort); do
  awk '
    /^#[ \t]*define[ \t]+[A-Za-z_][A-Za-z_0-9]*/ {
      if ($0 ~ /cb_fail\(/) { m = $0; sub(/^#[ \t]*define[ \t]+/, "", m); sub(/[^A-Za-z_0-9].*/, "", m); mac[m] = 1 }
      next
    }
    /^[A-Za-z_].*[A-Za-z_][A-Za-z_0-9]*[ \t]*\(/ && !/;[ \t]*$/ && !/^(typedef|struct|enum|union)/ {
      line = $0; sub(/\(.*/, "", line); n = split(line, a, /[ \t*]+/); fn = a[n]
    }
    /^}/ { fn = "" }
    {
      hit = $0 ~ /(^|[^A-Za-z_0-9])cb_fail\(/
      for (m in mac) if (index($0, m "(")) hit = 1
      if (hit && fn !~ /^cubert_/) print FILENAME " " (fn == "" ? "(file-scope)" : fn) " " FNR
    }' "$f"
done)
status=0
bad=$(printf '%s\n' "$found" | while read -r file fn line; do
  [ -n "$file" ] || continue
  grep -q "^${file} ${fn} " "$allow" || printf '%s %s\n' "$file" "$fn"
done | sort -u)
if [ -n "$bad" ]; then
  echo "cb_fail called outside a public entry point (fill a cb_errb instead):"
  printf '%s\n' "$found" | while read -r file fn line; do
    printf '%s\n' "$bad" | grep -qxF "$file $fn" && echo "  $file:$line: $fn"
  done
  status=1
fi
stale=$(grep -v '^#' "$allow" | grep -v '^$' | while read -r file fn reason; do
  printf '%s\n' "$found" | grep -q "^${file} ${fn} " || printf '%s %s\n' "$file" "$fn"
done)
if [ -n "$stale" ]; then
  echo "tests/fail_only_public.allow names what no longer calls cb_fail (remove it):"
  printf '  %s\n' "$stale"
  status=1
fi
[ $status = 0 ] && echo "cb_fail is called only from public entry points (and the allowed exceptions)"
exit $status
