package state

import (
	"fmt"
	"time"
)

// timeLayout is how times are stored: UTC, fixed width, so that text
// comparison in SQL orders them like time.Time.Before.
const timeLayout = "2006-01-02T15:04:05.000000000Z"

// FormatTime renders t as the database stores times.
func FormatTime(t time.Time) string { return t.UTC().Format(timeLayout) }

// ParseTime reads a time stored with FormatTime; what names the value in
// the error, which wraps ErrCorruptState and names the database.
func (d *DB) ParseTime(what, s string) (time.Time, error) {
	t, err := time.ParseInLocation(timeLayout, s, time.UTC)
	if err != nil {
		return time.Time{}, fmt.Errorf("%w: %s: %s %q is not a time: %v", ErrCorruptState, d.path, what, s, err)
	}
	return t, nil
}
