package lab

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"time"
)

// writeCredentials makes the CA, the serving certificate for the API's
// addresses, the service-account signing key and the admin's token.
func (k *KubeAPI) writeCredentials() error {
	now := time.Now()
	ca, caDER, caKey, err := labCA("reef-lab-ca "+k.Lab.Prefix, now)
	if err != nil {
		return err
	}
	// The kubernetes service's address (the range's first) too, as a
	// real API server's certificate has it.
	svc := KubeServiceRange.Addr().Next()
	srvDER, srvKey, err := signedCert(&x509.Certificate{
		SerialNumber: big.NewInt(2),
		Subject:      pkix.Name{CommonName: "kube-apiserver"},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.AddDate(1, 0, 0),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IPAddresses:  []net.IP{k.Address.AsSlice(), net.IPv4(127, 0, 0, 1), svc.AsSlice()},
		DNSNames:     []string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc.cluster.local"},
	}, ca, caKey)
	if err != nil {
		return err
	}
	saKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	if k.adminToken, err = newToken(); err != nil {
		return err
	}
	k.caPEM = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER})
	// kube-apiserver's token file: token,user,uid,"groups".
	tokens := k.adminToken + `,reef-lab-admin,reef-lab-admin,"system:masters"` + "\n"
	files := map[string][]byte{
		"ca.crt":        k.caPEM,
		"apiserver.crt": pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srvDER}),
	}
	keys := map[string]*ecdsa.PrivateKey{"apiserver.key": srvKey, "sa.key": saKey, "ca.key": caKey}
	if k.opts.Cluster {
		more, err := k.componentTokens()
		if err != nil {
			return err
		}
		tokens += more
		// What kube-apiserver shows the kubelets (exec, logs,
		// port-forward): kubeadm's apiserver-kubelet-client.
		cliDER, cliKey, err := signedCert(&x509.Certificate{
			SerialNumber: big.NewInt(3),
			Subject:      pkix.Name{CommonName: "kube-apiserver-kubelet-client", Organization: []string{"system:masters"}},
			NotBefore:    now.Add(-time.Hour),
			NotAfter:     now.AddDate(1, 0, 0),
			KeyUsage:     x509.KeyUsageDigitalSignature,
			ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
		}, ca, caKey)
		if err != nil {
			return err
		}
		files["apiserver-kubelet-client.crt"] = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: cliDER})
		keys["apiserver-kubelet-client.key"] = cliKey
	}
	files["tokens.csv"] = []byte(tokens)
	for name, key := range keys {
		der, err := x509.MarshalECPrivateKey(key)
		if err != nil {
			return err
		}
		files[name] = pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der})
	}
	pub, err := x509.MarshalPKIXPublicKey(&saKey.PublicKey)
	if err != nil {
		return err
	}
	files["sa.pub"] = pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pub})
	for name, b := range files {
		if err := os.WriteFile(k.path(name), b, 0o600); err != nil {
			return err
		}
	}
	return nil
}

// labCA makes a self-signed CA valid from an hour before now for a year:
// its certificate as parsed back, its DER and its key.
func labCA(name string, now time.Time) (*x509.Certificate, []byte, *ecdsa.PrivateKey, error) {
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, nil, err
	}
	ca := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: name},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.AddDate(1, 0, 0),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, ca, ca, &caKey.PublicKey, caKey)
	if err != nil {
		return nil, nil, nil, err
	}
	if ca, err = x509.ParseCertificate(caDER); err != nil {
		return nil, nil, nil, err
	}
	return ca, caDER, caKey, nil
}

// signedCert makes a key and the certificate of tmpl for it, signed by
// the CA.
func signedCert(tmpl, ca *x509.Certificate, caKey *ecdsa.PrivateKey) ([]byte, *ecdsa.PrivateKey, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		return nil, nil, err
	}
	return der, key, nil
}

// newToken is a random bearer token: 16 bytes in hex.
func newToken() (string, error) {
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return hex.EncodeToString(b), nil
}

// componentTokens gives each of the cluster's components, as kubeadm
// names them, a token (k.tokens) instead of kubeadm's client certificate,
// and returns their lines of the token file.
func (k *KubeAPI) componentTokens() (string, error) {
	k.tokens = map[string]string{}
	users := [][2]string{
		{"system:kube-controller-manager", ""},
		{"system:kube-scheduler", ""},
		{"system:kube-proxy", ""},
	}
	for _, n := range k.opts.Nodes {
		users = append(users, [2]string{"system:node:" + n, "system:nodes"})
	}
	var lines string
	for _, u := range users {
		t, err := newToken()
		if err != nil {
			return "", err
		}
		k.tokens[u[0]] = t
		lines += fmt.Sprintf("%s,%s,%s,%q\n", t, u[0], u[0], u[1])
	}
	return lines, nil
}
