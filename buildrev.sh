# Sourced by benchcmp.sh and instrcmp.sh, with $rev set: builds the core
# package's test binary at revision $rev into $work/old.test and from the
# working tree into $work/new.test, in a temporary directory $work that is
# removed on exit.
work=$(mktemp -d)
trap 'git worktree remove --force "$work/old" >/dev/null 2>&1 || true; rm -rf "$work"' EXIT
git worktree add --detach "$work/old" "$rev" >/dev/null 2>&1
(cd "$work/old" && go test -c -o "$work/old.test" .)
go test -c -o "$work/new.test" .
