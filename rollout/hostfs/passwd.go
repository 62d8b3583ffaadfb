package hostfs

import (
	"bufio"
	"bytes"
	"errors"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// User is an entry of the host's /etc/passwd.
type User struct {
	Name string
	UID  int
	GID  int
	Home string
}

// accounts is the host's user and group database, read once per Apply.
type accounts struct {
	users  map[string]User
	groups map[string]int
}

// LookupUser finds a user in the host's /etc/passwd.
func (r *Root) LookupUser(name string) (User, bool, error) {
	users, err := r.readPasswd()
	if err != nil {
		return User{}, false, err
	}
	u, ok := users[name]
	return u, ok, nil
}

func (r *Root) readAccounts() (*accounts, error) {
	users, err := r.readPasswd()
	if err != nil {
		return nil, err
	}
	groups, err := r.readGroup()
	if err != nil {
		return nil, err
	}
	return &accounts{users: users, groups: groups}, nil
}

// readDB reads a colon-separated database; a missing file is empty.
func (r *Root) readDB(p string, minFields int, each func([]string)) error {
	data, err := r.ReadFile(p)
	if errors.Is(err, unix.ENOENT) || errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 0, 64*1024), 1<<20)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		f := strings.Split(line, ":")
		if len(f) < minFields {
			continue
		}
		each(f)
	}
	return sc.Err()
}

func (r *Root) readPasswd() (map[string]User, error) {
	users := map[string]User{}
	err := r.readDB("/etc/passwd", 7, func(f []string) {
		uid, err1 := strconv.Atoi(f[2])
		gid, err2 := strconv.Atoi(f[3])
		if err1 != nil || err2 != nil {
			return
		}
		// The first entry of a name wins, as with getpwnam.
		if _, dup := users[f[0]]; !dup {
			users[f[0]] = User{Name: f[0], UID: uid, GID: gid, Home: f[5]}
		}
	})
	return users, err
}

func (r *Root) readGroup() (map[string]int, error) {
	groups := map[string]int{}
	err := r.readDB("/etc/group", 3, func(f []string) {
		gid, err := strconv.Atoi(f[2])
		if err != nil {
			return
		}
		if _, dup := groups[f[0]]; !dup {
			groups[f[0]] = gid
		}
	})
	return groups, err
}
