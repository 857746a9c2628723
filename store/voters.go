package store

import (
	"encoding/json"
	"fmt"
	"net/netip"

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
