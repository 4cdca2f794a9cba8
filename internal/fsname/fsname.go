// Package fsname names the filesystem a directory is on, for benchmarks to
// log: fsync costs nothing on tmpfs, so a figure of the fsync toggle means
// little without it.
package fsname

import (
	"fmt"
	"syscall"
)

// Of is the name of dir's filesystem, with a warning for tmpfs.
func Of(dir string) string {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return "unknown filesystem"
	}
	switch st.Type {
	case 0x01021994:
		return "tmpfs (fsync is free here: numbers will not show the toggle)"
	case 0xEF53:
		return "ext4"
	case 0x58465342:
		return "xfs"
	case 0x9123683E:
		return "btrfs"
	case 0x794c7630:
		return "overlayfs"
	}
	return fmt.Sprintf("filesystem type %#x", st.Type)
}
