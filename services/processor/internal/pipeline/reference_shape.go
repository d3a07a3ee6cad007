package pipeline

import "msgexchange/services/processor/internal/decide"

// RefDataContractVersion is the version of the ref_data document contract
// (decide.RefDataContractVersion).
const RefDataContractVersion = decide.RefDataContractVersion

// The reference-data document shape lives with the handlers
// (services/processor/internal/decide); these names keep the pipeline's
// tests of it readable.
var (
	refDoc    = decide.RefDoc
	nullEmpty = decide.NullEmpty
	refKeys   = decide.RefKeys
)
