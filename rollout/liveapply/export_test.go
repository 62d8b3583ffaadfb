package liveapply

// MaxFile is maxFile, for the tests of the package's API.
const MaxFile = maxFile
