# Shell helpers of the tests that compare the summaries of `frugal train --json` runs. Sourced;
# the sourcing script defines fail MESSAGE.

summary_field() {  # FILE KEY: the value of KEY in the last summary record of FILE
  grep '"event":"summary"' "$1" | tail -1 | grep -o "\"$2\":[^,}]*" | cut -d: -f2-
}

# PREFIX LABEL_A FILE_A LABEL_B FILE_B KEY...: each KEY present and equal in both summaries.
same_summary() {
  local prefix=$1 label_a=$2 file_a=$3 label_b=$4 file_b=$5 key a b
  shift 5
  for key in "$@"; do
    a=$(summary_field "$file_a" "$key")
    b=$(summary_field "$file_b" "$key")
    echo "$prefix$key: $label_a $a, $label_b $b"
    [ -n "$a" ] && [ "$a" = "$b" ] || fail "$prefix$key differs"
  done
}
