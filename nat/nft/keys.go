package nft

import "github.com/google/nftables"

// The set keys the engine reads and writes: each is a shape the element
// codec (elems.go) knows. A table's builder names them in Set.KeyType and
// Set.DataType by nft's name.
var (
	// KeyIfnameAddr4 and KeyIfnameAddr6 are a node-side veth's name . a
	// pod's address (the ARP filter, the NDP filter).
	KeyIfnameAddr4 = nftables.MustConcatSetType(nftables.TypeIFName, nftables.TypeIPAddr)
	KeyIfnameAddr6 = nftables.MustConcatSetType(nftables.TypeIFName, nftables.TypeIP6Addr)
	// KeyAddrPort4 and KeyAddrPort6 are an address . a port: NetworkPolicy's
	// named ports, and a hostPort's target.
	KeyAddrPort4 = nftables.MustConcatSetType(nftables.TypeIPAddr, nftables.TypeInetService)
	KeyAddrPort6 = nftables.MustConcatSetType(nftables.TypeIP6Addr, nftables.TypeInetService)
	// KeyProtoPort is a protocol . a port (a hostPort on any address).
	KeyProtoPort = nftables.MustConcatSetType(nftables.TypeInetProto, nftables.TypeInetService)
	// KeyAddrProtoPort4 and 6 are an address . a protocol . a port (a
	// hostPort on one address).
	KeyAddrProtoPort4 = nftables.MustConcatSetType(nftables.TypeIPAddr, nftables.TypeInetProto, nftables.TypeInetService)
	KeyAddrProtoPort6 = nftables.MustConcatSetType(nftables.TypeIP6Addr, nftables.TypeInetProto, nftables.TypeInetService)
	// KeyAddrAddr4 and 6 are a pair of addresses (hairpin).
	KeyAddrAddr4 = nftables.MustConcatSetType(nftables.TypeIPAddr, nftables.TypeIPAddr)
	KeyAddrAddr6 = nftables.MustConcatSetType(nftables.TypeIP6Addr, nftables.TypeIP6Addr)
)

// keyTypes are the set keys the engine knows, by nft's name.
var keyTypes = map[string]nftables.SetDatatype{
	nftables.TypeIPAddr.Name:  nftables.TypeIPAddr,
	nftables.TypeIP6Addr.Name: nftables.TypeIP6Addr,
	KeyIfnameAddr4.Name:       KeyIfnameAddr4,
	KeyIfnameAddr6.Name:       KeyIfnameAddr6,
	KeyAddrPort4.Name:         KeyAddrPort4,
	KeyAddrPort6.Name:         KeyAddrPort6,
	KeyProtoPort.Name:         KeyProtoPort,
	KeyAddrProtoPort4.Name:    KeyAddrProtoPort4,
	KeyAddrProtoPort6.Name:    KeyAddrProtoPort6,
	KeyAddrAddr4.Name:         KeyAddrAddr4,
	KeyAddrAddr6.Name:         KeyAddrAddr6,
}
