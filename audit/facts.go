package audit

// fileFacts is what stillThere checks of the open file: how many names it
// has (0: deleted while open; known false when the platform does not
// say), whether it is a regular file, and its size.
type fileFacts struct {
	links      uint64
	linksKnown bool
	regular    bool
	size       int64
}

// statFacts reads f's facts with Stat.
func statFacts(f file) (fileFacts, error) {
	fi, err := f.Stat()
	if err != nil {
		return fileFacts{}, err
	}
	n, ok := links(fi)
	return fileFacts{links: n, linksKnown: ok, regular: fi.Mode().IsRegular(), size: fi.Size()}, nil
}
