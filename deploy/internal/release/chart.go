package release

import (
	"errors"
	"fmt"
	"os"

	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/provenance"
)

// ErrChart reports a chart package or provenance file that does not verify.
var ErrChart = errors.New("chart")

// packageChart does what `helm package --sign` does: the chart directory
// as a .tgz in outDir (appVersion set to the released version, so the
// chart's default image is the signed one) and its OpenPGP clear-signed
// .prov file. It returns the package's path.
func packageChart(chartDir, outDir, appVersion string, signer *provenance.Signatory) (string, error) {
	ch, err := loader.LoadDir(chartDir)
	if err != nil {
		return "", fmt.Errorf("%w: loading %s: %w", ErrChart, chartDir, err)
	}
	ch.Metadata.AppVersion = appVersion
	path, err := chartutil.Save(ch, outDir)
	if err != nil {
		return "", fmt.Errorf("%w: packaging: %w", ErrChart, err)
	}
	prov, err := signer.ClearSign(path)
	if err != nil {
		return "", fmt.Errorf("%w: signing %s: %w", ErrChart, path, err)
	}
	if err := os.WriteFile(path+".prov", []byte(prov), 0o644); err != nil {
		return "", fmt.Errorf("%w: writing the provenance file: %w", ErrChart, err)
	}
	return path, nil
}

// verifyChart does what `helm verify --keyring` does: the .prov file's
// signature against the public keyring, and the package's SHA-256 against
// the one the .prov file signs.
func verifyChart(pkg, keyring string) error {
	sig, err := provenance.NewFromKeyring(keyring, "")
	if err != nil {
		return fmt.Errorf("%w: reading the keyring %s: %w", ErrChart, keyring, err)
	}
	if _, err := sig.Verify(pkg, pkg+".prov"); err != nil {
		return fmt.Errorf("%w: %s: %w", ErrChart, pkg, err)
	}
	return nil
}
