# engine/megatron_args.tsv -> engine/megatron_args_table.c (the table gs__mg_args, sorted by name as the
# file is). Lines starting with '#' are comments; "# source: ..." becomes gs__mg_args_source.
function cstr(s) { gsub(/\\/, "\\\\", s); gsub(/"/, "\\\"", s); return "\"" s "\"" }
BEGIN {
    FS = "\t"
    print "/* Generated from engine/megatron_args.tsv by engine/megatron_args.awk: do not edit. */"
    print "#include \"engine/megatron_args.h\""
    print ""
    print "const gs__mg_arg gs__mg_args[] = {"
}
/^# source: / { source = substr($0, 11); next }
/^#/ { next }
NF != 5 { printf "megatron_args.awk: line %d: %d fields, expected 5\n", NR, NF > "/dev/stderr"; bad = 1; exit 1 }
{
    if (prev != "" && $1 <= prev) { printf "megatron_args.awk: line %d: %s not sorted\n", NR, $1 > "/dev/stderr"; bad = 1; exit 1 }
    prev = $1
    arity = $3 == "+" ? "GS__MG_ARITY_MANY" : $3 == "*" ? "GS__MG_ARITY_ANY" : $3 == "?" ? "GS__MG_ARITY_OPT" : $3
    kind = $4 == "true" ? "GS__MG_TRUE" : $4 == "false" ? "GS__MG_FALSE" : $4 == "const" ? "GS__MG_CONST" : "GS__MG_VALUE"
    printf "    {%s, %s, %s, %s, %s},\n", cstr($1), cstr($2), arity, kind, cstr($5)
    n++
}
END {
    if (bad)
        exit 1
    print "};"
    print ""
    printf "const size_t gs__mg_nargs = %d;\n", n
    printf "const char gs__mg_args_source[] = %s;\n", cstr(source)
}
