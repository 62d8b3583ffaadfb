package sbom

// The subset of SPDX 2.3's JSON form that Strata writes, in the order the
// fields are written.

type document struct {
	SPDXVersion       string         `json:"spdxVersion"`
	DataLicense       string         `json:"dataLicense"`
	SPDXID            string         `json:"SPDXID"`
	Name              string         `json:"name"`
	DocumentNamespace string         `json:"documentNamespace"`
	CreationInfo      creationInfo   `json:"creationInfo"`
	Packages          []pkg          `json:"packages"`
	Files             []file         `json:"files,omitempty"`
	Relationships     []relationship `json:"relationships"`
}

type creationInfo struct {
	Created  string   `json:"created"`
	Creators []string `json:"creators"`
	Comment  string   `json:"comment,omitempty"`
}

type pkg struct {
	SPDXID                string           `json:"SPDXID"`
	Name                  string           `json:"name"`
	VersionInfo           string           `json:"versionInfo,omitempty"`
	DownloadLocation      string           `json:"downloadLocation"`
	FilesAnalyzed         bool             `json:"filesAnalyzed"`
	PrimaryPackagePurpose string           `json:"primaryPackagePurpose,omitempty"`
	Checksums             []checksum       `json:"checksums,omitempty"`
	ExternalRefs          []externalRef    `json:"externalRefs,omitempty"`
	Comment               string           `json:"comment,omitempty"`
	Annotations           []spdxAnnotation `json:"annotations,omitempty"`
}

type file struct {
	SPDXID           string           `json:"SPDXID"`
	FileName         string           `json:"fileName"`
	FileTypes        []string         `json:"fileTypes,omitempty"`
	Checksums        []checksum       `json:"checksums"`
	LicenseConcluded string           `json:"licenseConcluded,omitempty"`
	CopyrightText    string           `json:"copyrightText,omitempty"`
	Comment          string           `json:"comment,omitempty"`
	Annotations      []spdxAnnotation `json:"annotations,omitempty"`
}

type checksum struct {
	Algorithm string `json:"algorithm"`
	Value     string `json:"checksumValue"`
}

type externalRef struct {
	Category string `json:"referenceCategory"`
	Type     string `json:"referenceType"`
	Locator  string `json:"referenceLocator"`
}

type relationship struct {
	Element string `json:"spdxElementId"`
	Type    string `json:"relationshipType"`
	Related string `json:"relatedSpdxElement"`
}

type spdxAnnotation struct {
	Date      string `json:"annotationDate"`
	Type      string `json:"annotationType"`
	Annotator string `json:"annotator"`
	Comment   string `json:"comment"`
}
