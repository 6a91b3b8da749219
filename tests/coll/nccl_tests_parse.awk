# A reader of nccl-tests' standard output (all_reduce_perf, all_gather_perf, ...), written to the
# format nccl-tests prints (NVIDIA/nccl-tests src/util.cu: writeResultHeader, writeBenchmarkLine*,
# writeResultFooter), as a user's post-processing script would read it:
#  - '#' lines are comments, except the column header (it names the columns: "root" appears from
#    nccl-tests 2.x on) and the footer lines "# Out of bounds values : N OK|FAILED" and
#    "# Avg bus bandwidth : X";
#  - a result row is a line whose first word is a byte count: size count type redop [root], then
#    the out-of-place and the in-place sets of time algbw busbw #wrong (#wrong is N/A when the run
#    did not check data); anything else (NCCL INFO lines) is skipped;
#  - mpirun --tag-output prefixes ("[1,0]<stdout>:") are stripped.
# Prints one CSV line per row, "size,count,type,redop,root,time,algbw,busbw,wrong,time_ip,
# algbw_ip,busbw_ip,wrong_ip", then "avg_busbw,X" and "out_of_bounds,N". Exits 1 with a message
# on stderr when the text breaks the format (a row before the header, a row of the wrong width,
# a column that is not a number, no footer).
function fail(msg) { print "nccl_tests_parse: line " NR ": " msg > "/dev/stderr"; bad = 1; exit 1 }
function is_num(s) { return s ~ /^-?[0-9]+(\.[0-9]*)?([eE][-+]?[0-9]+)?$/ }
function is_int(s) { return s ~ /^-?[0-9]+$/ }
{
    line = $0
    sub(/^\[[0-9]+,[0-9]+\]<std(out|err)>:/, "", line)
    if (line ~ /^#/) {
        if (line ~ /size/ && line ~ /count/ && line ~ /type/ && line ~ /redop/) {
            header = 1
            root = line ~ /root/
            width = root ? 13 : 12
        } else if (line ~ /^# *Avg bus bandwidth *:/) {
            v = line
            sub(/^# *Avg bus bandwidth *: */, "", v)
            split(v, w, " ")
            if (!is_num(w[1]))
                fail("Avg bus bandwidth is not a number: " w[1])
            avg = w[1]
            have_avg = 1
        } else if (line ~ /^# *Out of bounds values *:/) {
            v = line
            sub(/^# *Out of bounds values *: */, "", v)
            split(v, w, " ")
            if (!is_int(w[1]))
                fail("Out of bounds values is not a count: " w[1])
            oob = w[1]
            have_oob = 1
        }
        next
    }
    n = split(line, f, " ")
    if (n == 0 || !is_int(f[1]))
        next
    if (!header)
        fail("a result row before the column header")
    if (n != width)
        fail("a result row of " n " columns, expected " width)
    if (!is_int(f[2]))
        fail("count is not an integer: " f[2])
    first = root ? 6 : 5
    r = root ? f[5] : ""
    if (root && !is_int(r))
        fail("root is not an integer: " r)
    for (h = 0; h < 2; h++) {
        for (k = 0; k < 3; k++)
            if (!is_num(f[first + 4 * h + k]))
                fail("column " (first + 4 * h + k) " is not a number: " f[first + 4 * h + k])
        if (f[first + 4 * h + 3] != "N/A" && !is_num(f[first + 4 * h + 3]))
            fail("#wrong is neither a count nor N/A: " f[first + 4 * h + 3])
    }
    printf "%s,%s,%s,%s,%s", f[1], f[2], f[3], f[4], r
    for (k = first; k <= n; k++)
        printf ",%s", f[k]
    printf "\n"
    rows++
}
END {
    if (bad)
        exit 1
    if (!header)
        fail("no column header")
    if (!rows)
        fail("no result rows")
    if (!have_avg || !have_oob)
        fail("no footer (# Out of bounds values, # Avg bus bandwidth)")
    print "avg_busbw," avg
    print "out_of_bounds," oob
}
