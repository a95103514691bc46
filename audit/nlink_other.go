//go:build !unix

package audit

import "os"

// links: this platform does not say how many names a file has.
func links(os.FileInfo) (uint64, bool) { return 0, false }
