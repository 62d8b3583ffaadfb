// Package window computes when a MachineConfigPool's maintenance windows
// are open: whether one is open at a given instant, until when, and when
// the next one opens. It is pure (the instant is an argument), so the
// rollout controller and the tests drive it with any clock.
//
// A window opens on each of its days at its start time, read as wall-clock
// time in its time zone, and stays open for its duration, which is elapsed
// time. The semantics across daylight-saving changes follow systemd
// timers and kured, which also read wall-clock time in a zone:
//
//   - A start that does not exist on a day (02:30 in Europe/Berlin on the
//     spring-forward Sunday) opens at the first instant after the gap
//     (03:00 local, the transition), not an hour late and not skipped.
//   - A start that occurs twice (02:30 on the fall-back Sunday) opens at
//     the first occurrence.
//   - The duration is elapsed time: a 4h window at 01:00 on the
//     spring-forward day closes at 06:00 local, and at 04:00 local on the
//     fall-back day.
//
// A window belongs to the day it starts on: Sunday 22:00 for 4h is open on
// Monday at 01:00, whatever Monday's own windows say. Overlapping and
// adjacent windows (of the same pool) merge: the pool is open from the
// first opening to the last closing, and "closes at" is the end of the
// merged span.
package window
