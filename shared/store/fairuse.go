package store

import (
	"context"
	"time"
)

// FairUseWindow is the rolling window of the fair-use ceilings (spec 8).
const FairUseWindow = 30 * 24 * time.Hour

// FairUse counts upstream attempts per account and metered endpoint over a
// rolling 30 days.
type FairUse interface {
	// FairUseUsed is the attempts counted in the 30 days up to now.
	FairUseUsed(ctx context.Context, accountID, endpoint string, now time.Time) (int64, error)
	// AddFairUse counts attempts at now and returns the new total.
	AddFairUse(ctx context.Context, accountID, endpoint string, attempts int64, now time.Time) (int64, error)
}

// FairUseState is one account's use of one endpoint: per-day counts.
type FairUseState struct {
	Days []DayCount `json:"days"`
}

// DayCount is the attempts of one UTC day (days since the Unix epoch).
type DayCount struct {
	Day   int64 `json:"d"`
	Count int64 `json:"n"`
}

const day = 24 * time.Hour

// Used totals the days inside the window ending at now, dropping older
// ones. Days are whole UTC days, kept until 30 days have passed since the
// day ended, so an attempt counts for at least 30 days (at most 31).
func (s *FairUseState) Used(now time.Time) int64 {
	first := now.Add(-FairUseWindow).Unix() / int64(day/time.Second)
	keep := s.Days[:0]
	var total int64
	for _, d := range s.Days {
		if d.Day >= first {
			keep = append(keep, d)
			total += d.Count
		}
	}
	s.Days = keep
	return total
}

// Add counts attempts on now's day and returns the new total.
func (s *FairUseState) Add(attempts int64, now time.Time) int64 {
	total := s.Used(now) + attempts
	today := now.Unix() / int64(day/time.Second)
	if n := len(s.Days); n > 0 && s.Days[n-1].Day == today {
		s.Days[n-1].Count += attempts
	} else {
		s.Days = append(s.Days, DayCount{Day: today, Count: attempts})
	}
	return total
}
