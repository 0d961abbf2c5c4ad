#!/usr/bin/env bash
# with_tmpfs.sh SIZE DIR COMMAND: runs COMMAND (bash -c) with a tmpfs of SIZE mounted at DIR,
# unmounted again however COMMAND ends. For the tests of full and read-only filesystems (root).
set -u
size=$1 dir=$2
umount "$dir" 2>/dev/null  # what an interrupted run may have left
mkdir -p "$dir" && mount -t tmpfs -o "size=$size,mode=0700" tmpfs "$dir" || exit 99
trap 'umount "$dir" || umount -l "$dir"' EXIT
bash -c "$3"
