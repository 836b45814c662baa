package coord_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/rune-org/rune/coord"
)

// BarrierSpec.Check refuses totals, needs and TTLs no barrier can have and
// gives a spec without TTL the default.
func TestBarrierSpecCheck(t *testing.T) {
	for _, tc := range []struct {
		spec    coord.BarrierSpec
		ttl     time.Duration
		wantErr string
	}{
		{coord.BarrierSpec{Total: 1, Need: 1}, coord.DefaultBarrierTTL, ""},
		{coord.BarrierSpec{Total: 3, Need: 3, TTL: time.Minute}, time.Minute, ""},
		{coord.BarrierSpec{Total: 0, Need: 1}, 0, "spec.Total is 0"},
		{coord.BarrierSpec{Total: 2, Need: 0}, 0, "spec.Need is 0"},
		{coord.BarrierSpec{Total: 2, Need: 3}, 0, "spec.Need is 3"},
		{coord.BarrierSpec{Total: 2, Need: 1, TTL: -time.Second}, 0, "spec.TTL is negative"},
	} {
		ttl, err := tc.spec.Check()
		if tc.wantErr == "" && (err != nil || ttl != tc.ttl) || tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
			t.Errorf("%+v.Check() = %v, %v; want %v, error %q", tc.spec, ttl, err, tc.ttl, tc.wantErr)
		}
	}
}

type badRecord struct{}

func (badRecord) MarshalBinary() ([]byte, error) { return nil, errors.New("boom") }

// Finish.Encode checks what every serialising coordinator checks first.
func TestFinishEncode(t *testing.T) {
	if rec, err := (coord.Finish{Record: coord.Bytes("r")}).Encode("e"); err != nil || string(rec) != "r" {
		t.Errorf("Encode = %q, %v", rec, err)
	}
	if rec, err := (coord.Finish{}).Encode("e"); err != nil || rec != nil {
		t.Errorf("Encode without a record = %q, %v", rec, err)
	}
	if _, err := (coord.Finish{}).Encode(""); !errors.Is(err, coord.ErrUnknownExecution) {
		t.Errorf("Encode of exec \"\" = %v, want ErrUnknownExecution", err)
	}
	if _, err := (coord.Finish{Spawned: -1}).Encode("e"); err == nil || !strings.Contains(err.Error(), "spawned is -1") {
		t.Errorf("Encode with Spawned -1 = %v", err)
	}
	if _, err := (coord.Finish{Record: badRecord{}}).Encode("e"); err == nil || !strings.Contains(err.Error(), "boom") {
		t.Errorf("Encode of a record that fails = %v", err)
	}
	// The first 128 bits of SHA-256("x"), the same in every implementation.
	if got := coord.BlobRef([]byte("x")); got != "2d711642b726b04401627ca9fbac32f5" {
		t.Errorf("BlobRef(x) = %s", got)
	}
}
