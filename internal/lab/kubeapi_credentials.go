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
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	ca := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "reef-lab-ca " + k.Lab.Prefix},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.AddDate(1, 0, 0),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, ca, ca, &caKey.PublicKey, caKey)
	if err != nil {
		return err
	}
	if ca, err = x509.ParseCertificate(caDER); err != nil {
		return err
	}
	srvKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	// The kubernetes service's address (the range's first) too, as a
	// real API server's certificate has it.
	svc := KubeServiceRange.Addr().Next()
	srv := &x509.Certificate{
		SerialNumber: big.NewInt(2),
		Subject:      pkix.Name{CommonName: "kube-apiserver"},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.AddDate(1, 0, 0),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IPAddresses:  []net.IP{k.Address.AsSlice(), net.IPv4(127, 0, 0, 1), svc.AsSlice()},
		DNSNames:     []string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc.cluster.local"},
	}
	srvDER, err := x509.CreateCertificate(rand.Reader, srv, ca, &srvKey.PublicKey, caKey)
	if err != nil {
		return err
	}
	saKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	token := make([]byte, 16)
	if _, err := rand.Read(token); err != nil {
		return err
	}
	k.adminToken = hex.EncodeToString(token)
	k.caPEM = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER})
	// kube-apiserver's token file: token,user,uid,"groups".
	tokens := k.adminToken + `,reef-lab-admin,reef-lab-admin,"system:masters"` + "\n"
	files := map[string][]byte{
		"ca.crt":        k.caPEM,
		"apiserver.crt": pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srvDER}),
	}
	keys := map[string]*ecdsa.PrivateKey{"apiserver.key": srvKey, "sa.key": saKey, "ca.key": caKey}
	if k.opts.Cluster {
		// The cluster's components as kubeadm names them, each with a
		// token instead of kubeadm's client certificate.
		k.tokens = map[string]string{}
		users := [][2]string{
			{"system:kube-controller-manager", ""},
			{"system:kube-scheduler", ""},
			{"system:kube-proxy", ""},
		}
		for _, n := range k.opts.Nodes {
			users = append(users, [2]string{"system:node:" + n, "system:nodes"})
		}
		for _, u := range users {
			b := make([]byte, 16)
			if _, err := rand.Read(b); err != nil {
				return err
			}
			k.tokens[u[0]] = hex.EncodeToString(b)
			tokens += fmt.Sprintf("%s,%s,%s,%q\n", k.tokens[u[0]], u[0], u[0], u[1])
		}
		// What kube-apiserver shows the kubelets (exec, logs,
		// port-forward): kubeadm's apiserver-kubelet-client.
		cliKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			return err
		}
		cli := &x509.Certificate{
			SerialNumber: big.NewInt(3),
			Subject:      pkix.Name{CommonName: "kube-apiserver-kubelet-client", Organization: []string{"system:masters"}},
			NotBefore:    now.Add(-time.Hour),
			NotAfter:     now.AddDate(1, 0, 0),
			KeyUsage:     x509.KeyUsageDigitalSignature,
			ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
		}
		cliDER, err := x509.CreateCertificate(rand.Reader, cli, ca, &cliKey.PublicKey, caKey)
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
