package fsm

// Redis Cluster's key-to-slot mapping: it orders the keyspace (see keyHash)
// and the server uses it for MOVED redirections and CLUSTER KEYSLOT. kvs is
// one shard owning every slot, so the slot never changes where a key goes;
// clients compute it themselves and compare.

// ClusterSlots is the number of hash slots of a Redis Cluster.
const ClusterSlots = 16384

// crc16Tables are CRC-16/XMODEM (polynomial 0x1021, initial value 0), the
// checksum Redis Cluster hashes keys with, for slicing by four: table k
// holds the CRC of a byte followed by k zero bytes, so four bytes fold in
// with four independent lookups instead of a chain of four. Keys are
// hashed on every command, twice for a read-modify-write.
var crc16Tables = func() (t [4][256]uint16) {
	for i := range t[0] {
		crc := uint16(i) << 8
		for range 8 {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
		t[0][i] = crc
	}
	for k := 1; k < 4; k++ {
		for i := range t[k] {
			prev := t[k-1][i]
			t[k][i] = prev<<8 ^ t[0][prev>>8]
		}
	}
	return t
}()

func crc16[T string | []byte](b T) uint16 {
	var crc uint16
	t := &crc16Tables
	for len(b) >= 4 {
		crc = t[3][byte(crc>>8)^b[0]] ^ t[2][byte(crc)^b[1]] ^ t[1][b[2]] ^ t[0][b[3]]
		b = b[4:]
	}
	for i := 0; i < len(b); i++ {
		crc = crc<<8 ^ t[0][byte(crc>>8)^b[i]]
	}
	return crc
}

// KeySlot is Redis's keyHashSlot: when the key holds a non-empty {hashtag},
// only the tag is hashed, so that related keys share a slot.
func KeySlot[T string | []byte](key T) int {
	for i := 0; i < len(key); i++ {
		if key[i] != '{' {
			continue
		}
		for j := i + 1; j < len(key); j++ {
			if key[j] == '}' {
				if j > i+1 {
					key = key[i+1 : j]
				}
				return int(crc16(key)) & (ClusterSlots - 1)
			}
		}
		break
	}
	return int(crc16(key)) & (ClusterSlots - 1)
}
