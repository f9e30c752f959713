package dynamostore

import (
	"bytes"
	"crypto/rand"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/meridian-data/meridian/shared/store"
)

// The layout of monitors, runs and jobs on the table: the account item
// counts the monitors, every run, run changes and job item carries the TTL
// attribute, and a run whose two documents do not fit together keeps its
// changes in the run changes item.
func TestMonitorItems(t *testing.T) {
	s := newStore(t)
	a := mustAccount(t, s, 0)
	now := time.Now().UTC()
	var ms []store.Monitor
	for i := 0; i < 3; i++ {
		m, err := s.CreateMonitor(ctx, store.Monitor{ID: store.NewMonitorID(), AccountID: a.ID, KeyID: "key_1",
			State: store.MonitorActive, CreatedAt: now, UpdatedAt: now})
		if err != nil {
			t.Fatal(err)
		}
		ms = append(ms, m)
	}
	if err := s.DeleteMonitor(ctx, a.ID, ms[2].ID); err != nil {
		t.Fatal(err)
	}
	if n := number(rawItem(t, s, accountPK(a.ID), skAccount)[attrMonitors]); n != 2 {
		t.Errorf("the account counts %d monitors", n)
	}
	if _, err := s.CreateMonitor(ctx, store.Monitor{ID: "mon_a#b", AccountID: a.ID, KeyID: "key_1", State: store.MonitorActive}); err == nil {
		t.Error("a monitor id with '#' would make run keys ambiguous")
	}

	big := func() []byte {
		b := make([]byte, store.MaxDocumentBytes)
		_, _ = rand.Read(b)
		return b
	}
	for i, docs := range [][2][]byte{{[]byte(`{"a":1}`), []byte(`{"b":2}`)}, {big(), big()}} {
		sched := now.Add(time.Duration(i+1) * time.Hour).Truncate(time.Second)
		r, claimed, err := s.ClaimRun(ctx, store.MonitorRun{ID: store.RunID(sched), MonitorID: ms[0].ID, AccountID: a.ID,
			ScheduledAt: sched, Claim: "c", StartedAt: now, LeaseUntil: now.Add(time.Minute)}, now)
		if err != nil || !claimed {
			t.Fatal(claimed, err)
		}
		r.Status, r.Data, r.Changes = store.RunSucceeded, docs[0], docs[1]
		if _, err := s.CompleteRun(ctx, r, 0, "", ""); err != nil {
			t.Fatal(err)
		}
		item := rawItem(t, s, accountPK(a.ID), runSK(ms[0].ID, r.ID))
		exp := now.Add(store.MonitorRunTTL)
		if number(item[AttrExpiresAt]) != exp.Unix()+1 || number(item["expires_at_ns"]) != exp.UnixNano() {
			t.Errorf("run %d: expires_at %d, expires_at_ns %d", i, number(item[AttrExpiresAt]), number(item["expires_at_ns"]))
		}
		ext, _ := item["changes_ext"].(*types.AttributeValueMemberBOOL)
		_, inline := item["changes"]
		extItem := rawItem(t, s, accountPK(a.ID), runExtSK(ms[0].ID, r.ID))
		switch i {
		case 0:
			if ext != nil || !inline || extItem != nil {
				t.Errorf("small documents: changes_ext %v, changes inline %v, run changes item %v", ext, inline, extItem != nil)
			}
		case 1:
			if ext == nil || !ext.Value || inline || extItem == nil || number(extItem[AttrExpiresAt]) < exp.Unix() {
				t.Errorf("large documents: changes_ext %v, changes inline %v, run changes item %v", ext, inline, extItem)
			}
		}
		got, err := s.Run(ctx, a.ID, ms[0].ID, r.ID, now)
		if err != nil || !bytes.Equal(got.Data, docs[0]) || !bytes.Equal(got.Changes, docs[1]) {
			t.Errorf("run %d read back: %d and %d bytes, %v", i, len(got.Data), len(got.Changes), err)
		}
	}

	j := store.Job{ID: store.NewJobID(), AccountID: a.ID, RequestID: "req_1", State: store.JobQueued, CreatedAt: now}
	if err := s.CreateJob(ctx, j); err != nil {
		t.Fatal(err)
	}
	item := rawItem(t, s, accountPK(a.ID), pfxJob+j.ID)
	if exp := now.Add(store.JobTTL); number(item[AttrExpiresAt]) != exp.Unix()+1 || number(item["expires_at_ns"]) != exp.UnixNano() {
		t.Errorf("job: expires_at %d, expires_at_ns %d", number(item[AttrExpiresAt]), number(item["expires_at_ns"]))
	}
}
