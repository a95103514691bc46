package pkgsource_test

import (
	"testing"

	"github.com/aileronhq/aileron/pkgsource"
	"github.com/aileronhq/aileron/store"
)

// An archive that unpacks is never refused by the store for its size: the
// archive limits are at most the store's package limits.
func TestLimitsWithinTheStore(t *testing.T) {
	if pkgsource.MaxFileSize > store.MaxPackageFileSize || pkgsource.MaxTotalSize > store.MaxPackageSize || pkgsource.MaxFiles > store.MaxPackageFiles {
		t.Errorf("archive limits (%d per file, %d in all, %d files) exceed the store's (%d, %d, %d)",
			pkgsource.MaxFileSize, pkgsource.MaxTotalSize, pkgsource.MaxFiles,
			store.MaxPackageFileSize, store.MaxPackageSize, store.MaxPackageFiles)
	}
}
