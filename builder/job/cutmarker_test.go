package job

import "github.com/strata-dev/strata/builder/jobkit"

// cutMarker is the mark BoundFailure puts on a cut log tail, which the
// tests of this package look for.
const cutMarker = jobkit.CutMarker
