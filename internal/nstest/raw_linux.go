package nstest

import (
	"errors"

	"golang.org/x/sys/unix"
)

// SendRaw sends the IP packet p as built, whatever source it names, from a
// raw socket in the calling thread's network namespace: through that
// namespace's output hook (its fence), as a process holding CAP_NET_RAW
// would. A packet the output hook drops or rejects is no error (the kernel
// answers EPERM).
func SendRaw(p []byte) error {
	fam, sa, err := destination(p)
	if err != nil {
		return err
	}
	fd, err := unix.Socket(fam, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.IPPROTO_RAW)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	if err := unix.Sendto(fd, p, 0, sa); err != nil && err != unix.EPERM {
		return err
	}
	return nil
}

// destination is the address family and destination of the IP packet p.
func destination(p []byte) (int, unix.Sockaddr, error) {
	switch {
	case len(p) >= 20 && p[0]>>4 == 4:
		return unix.AF_INET, &unix.SockaddrInet4{Addr: [4]byte(p[16:20])}, nil
	case len(p) >= 40 && p[0]>>4 == 6:
		return unix.AF_INET6, &unix.SockaddrInet6{Addr: [16]byte(p[24:40])}, nil
	}
	return 0, nil, errors.New("not an IPv4 or IPv6 packet")
}
