#!/bin/sh
# check_core_alone.sh CORE_O — the caching core, linked into one relocatable object without the recorder
# or the C API, must leave nothing of ours undefined: every gpumem:: symbol it uses it defines, and it
# names no gpumem::rec:: symbol at all (it reaches the recorder only through the EventSink it is given).
core="$1"
rec=$(nm -C "$core" | grep 'gpumem::rec::' || true)
undef=$(nm -C --undefined-only "$core" | grep 'gpumem' || true)
if [ -n "$rec" ] || [ -n "$undef" ]; then
  echo "FAIL core_alone_references_no_recorder:"
  [ -n "$rec" ] && echo "$rec" | sed 's/^/  rec: /'
  [ -n "$undef" ] && echo "$undef" | sed 's/^/  undefined: /'
  exit 1
fi
echo "ok   core_alone_references_no_recorder ($(nm -C --defined-only "$core" | grep -c 'gpumem::core::') gpumem::core symbols defined, none of gpumem::rec)"
