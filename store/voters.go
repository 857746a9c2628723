package store

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/reefcni/reef/blockproto"
)

// keyVoterList holds the voter list this store last ran under
// (blockproto.VoterList as JSON). A store made before it was kept has none.
var keyVoterList = []byte("voter-list")

type voterListRecord struct {
	Voters []netip.Addr `json:"voters"`
	Alone  bool         `json:"alone,omitempty"`
}

// VoterList returns the voter list the store last ran under; ok is false
// when it keeps none (a new store, or one made before stores kept it).
func (s *Store) VoterList() (l blockproto.VoterList, ok bool, err error) {
	err = s.view(func(tx *bolt.Tx) error {
		v := tx.Bucket(bucketMeta).Get(keyVoterList)
		if v == nil {
			return nil
		}
		var r voterListRecord
		if err := json.Unmarshal(v, &r); err != nil {
			return fmt.Errorf("voter list %q: %w", v, err)
		}
		l, ok = blockproto.VoterList{Voters: r.Voters, Alone: r.Alone}, true
		return nil
	})
	if err != nil {
		return blockproto.VoterList{}, false, fmt.Errorf("read the voter list of %s: %w", s.path, err)
	}
	return l, ok, nil
}

// SetVoterList records the voter list the node runs under from now on.
func (s *Store) SetVoterList(l blockproto.VoterList) error {
	v, err := json.Marshal(voterListRecord{Voters: blockproto.Voters(l.Voters), Alone: l.Alone})
	if err != nil {
		return err
	}
	if err := s.update(func(tx *bolt.Tx) error { return tx.Bucket(bucketMeta).Put(keyVoterList, v) }); err != nil {
		return fmt.Errorf("record the voter list in %s: %w", s.path, err)
	}
	return nil
}

// keyNewStore marks a store that has not run under a cluster's voter list
// yet: Open writes it when it creates the file (a first start, a wiped
// state dir, or `reef store recover` drawing a new incarnation), and
// RunUnder removes it the first time the node runs under a list that is
// not its own alone. A store made before the mark existed has none: it is
// not new, whatever it holds.
var keyNewStore = []byte("new-store")

// keyVoterRestricted marks a store whose node, a voter with a new store,
// grants only confirmed owners (blockproto.State.Restricted) until it is
// taken out of the voter list and added back.
var keyVoterRestricted = []byte("voter-restricted")

// New reports whether the store has run under no cluster's voter list
// since it was created (keyNewStore).
func (s *Store) New() (bool, error) {
	var ok bool
	err := s.view(func(tx *bolt.Tx) error {
		ok = tx.Bucket(bucketMeta).Get(keyNewStore) != nil
		return nil
	})
	if err != nil {
		return false, fmt.Errorf("read %s: %w", s.path, err)
	}
	return ok, nil
}

// VoterRestricted reports whether the store is marked restricted
// (keyVoterRestricted); LoadProtocol gives it as State.Restricted.
func (s *Store) VoterRestricted() (bool, error) {
	var ok bool
	err := s.view(func(tx *bolt.Tx) error {
		ok = tx.Bucket(bucketMeta).Get(keyVoterRestricted) != nil
		return nil
	})
	if err != nil {
		return false, fmt.Errorf("read %s: %w", s.path, err)
	}
	return ok, nil
}

// RunUnder records, in one transaction, the voter list the node runs under
// from now on and whether it is restricted; a list that is not Alone ends
// the store's being new.
func (s *Store) RunUnder(l blockproto.VoterList, restricted bool) error {
	v, err := json.Marshal(voterListRecord{Voters: blockproto.Voters(l.Voters), Alone: l.Alone})
	if err != nil {
		return err
	}
	err = s.update(func(tx *bolt.Tx) error {
		meta := tx.Bucket(bucketMeta)
		if err := meta.Put(keyVoterList, v); err != nil {
			return err
		}
		if !l.Alone {
			if err := meta.Delete(keyNewStore); err != nil {
				return err
			}
		}
		if !restricted {
			return meta.Delete(keyVoterRestricted)
		}
		return meta.Put(keyVoterRestricted, []byte(time.Now().UTC().Format(time.RFC3339)))
	})
	if err != nil {
		return fmt.Errorf("record the voter list in %s: %w", s.path, err)
	}
	return nil
}

// Init creates the store of a voter of a new cluster before its first
// start (`reef store init`): a new store that has run under the cluster's
// list l, so that the daemon does not take it for a wiped voter's. It
// refuses when a store, or the identity file of one, is already there:
// a node that ran before, whose votes may count in the cluster, must
// not be made to look new. It returns the new incarnation.
func Init(path string, opts Options, l blockproto.VoterList) (inc uint32, err error) {
	if fi, err := os.Stat(path); err == nil {
		return 0, fmt.Errorf("store %s already exists (%d bytes, modified %s): init is only for a node that never ran",
			path, fi.Size(), fi.ModTime().UTC().Format(time.RFC3339))
	} else if !errors.Is(err, os.ErrNotExist) {
		return 0, fmt.Errorf("init %s: %w", path, err)
	}
	if id, ok, err := ReadIdentity(path); err != nil || ok {
		what := fmt.Sprintf("%s says this node ran as incarnation %08x", IdentityPath(path), id.Incarnation)
		if err != nil {
			what = err.Error()
		}
		return 0, fmt.Errorf("init %s: %s: init is only for a node that never ran", path, what)
	}
	st, err := Open(path, opts)
	if err != nil {
		return 0, err
	}
	if err := st.RunUnder(l, false); err != nil {
		st.Close()
		return 0, err
	}
	inc, _ = st.Incarnation()
	return inc, st.Close()
}
