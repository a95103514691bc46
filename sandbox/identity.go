package sandbox

import (
	"fmt"
	"os"
	"os/user"
	"strconv"
	"strings"
)

// Identity is the user a fenced command runs as.
type Identity struct {
	UID    uint32   `json:"uid"`
	GID    uint32   `json:"gid"`
	Groups []uint32 `json:"groups,omitempty"`
	Name   string   `json:"name,omitempty"` // "" when the uid has no passwd entry
	Home   string   `json:"home,omitempty"` // "" when the uid has no passwd entry
}

// String is "name (uid N)" or "uid N".
func (id Identity) String() string {
	if id.Name != "" {
		return fmt.Sprintf("%s (uid %d)", id.Name, id.UID)
	}
	return fmt.Sprintf("uid %d", id.UID)
}

// ResolveUser is the identity spec names: "NAME", "UID" or "UID:GID".
// An empty spec picks the default: the user who ran sudo (SUDO_UID and
// SUDO_GID in environ), else the caller when not root, else "nobody". A
// fenced command runs as root only when spec says so: root shares the
// host's files, and with them ways out the fence cannot see.
func ResolveUser(spec string, environ []string) (Identity, error) {
	if spec == "" {
		if uid := envValue(environ, "SUDO_UID"); uid != "" && uid != "0" {
			if gid := envValue(environ, "SUDO_GID"); gid != "" {
				return ResolveUser(uid+":"+gid, nil)
			}
			return ResolveUser(uid, nil)
		}
		if uid := os.Getuid(); uid != 0 {
			return ResolveUser(strconv.Itoa(uid)+":"+strconv.Itoa(os.Getgid()), nil)
		}
		spec = "nobody"
	}
	name, group, hasGroup := strings.Cut(spec, ":")
	id, err := lookupUser(name)
	if err != nil {
		return Identity{}, err
	}
	if hasGroup {
		gid, err := strconv.ParseUint(group, 10, 32)
		if err != nil {
			return Identity{}, fmt.Errorf("%w: --user %q: the group must be a number, as in 1000:1000", ErrLaunch, spec)
		}
		id.GID, id.Groups = uint32(gid), nil
	}
	return id, nil
}

// lookupUser finds name (a user name or a numeric uid) in the user
// database. A numeric uid with no entry is accepted with gid = uid.
func lookupUser(name string) (Identity, error) {
	u, err := user.Lookup(name)
	if err != nil {
		if _, nerr := strconv.ParseUint(name, 10, 32); nerr == nil {
			u, err = user.LookupId(name)
			if err != nil {
				n, _ := strconv.ParseUint(name, 10, 32)
				return Identity{UID: uint32(n), GID: uint32(n)}, nil
			}
		}
	}
	if err != nil {
		if name == "nobody" {
			return Identity{UID: 65534, GID: 65534, Name: "nobody"}, nil
		}
		return Identity{}, fmt.Errorf("%w: --user %q: no such user; give a user name, a uid, or uid:gid", ErrLaunch, name)
	}
	uid, err1 := strconv.ParseUint(u.Uid, 10, 32)
	gid, err2 := strconv.ParseUint(u.Gid, 10, 32)
	if err1 != nil || err2 != nil {
		return Identity{}, fmt.Errorf("%w: --user %q: the user database gives a non-numeric uid or gid", ErrLaunch, name)
	}
	id := Identity{UID: uint32(uid), GID: uint32(gid), Name: u.Username, Home: u.HomeDir}
	if gids, err := u.GroupIds(); err == nil {
		for _, g := range gids {
			if n, err := strconv.ParseUint(g, 10, 32); err == nil && uint32(n) != id.GID {
				id.Groups = append(id.Groups, uint32(n))
			}
		}
	}
	return id, nil
}

// identityEnv sets HOME, USER and LOGNAME for id when it is not the caller.
func identityEnv(env []string, id Identity) []string {
	if int(id.UID) == os.Getuid() {
		return env
	}
	home := id.Home
	if home == "" {
		home = "/"
	}
	vars := []EnvVar{{"HOME", home}}
	if id.Name != "" {
		vars = append(vars, EnvVar{"USER", id.Name}, EnvVar{"LOGNAME", id.Name})
	}
	return MergeEnv(env, vars)
}
