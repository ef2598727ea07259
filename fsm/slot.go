package fsm

// Redis Cluster's key-to-slot mapping: it orders the keyspace (see keyHash)
// and the server uses it for MOVED redirections and CLUSTER KEYSLOT. kvs is
// one shard owning every slot, so the slot never changes where a key goes;
// clients compute it themselves and compare.

// ClusterSlots is the number of hash slots of a Redis Cluster.
const ClusterSlots = 16384

// crc16Table is CRC-16/XMODEM (polynomial 0x1021, initial value 0), the
// checksum Redis Cluster hashes keys with.
var crc16Table = func() (t [256]uint16) {
	for i := range t {
		crc := uint16(i) << 8
		for range 8 {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
		t[i] = crc
	}
	return t
}()

func crc16[T string | []byte](b T) uint16 {
	var crc uint16
	for i := 0; i < len(b); i++ {
		crc = crc<<8 ^ crc16Table[byte(crc>>8)^b[i]]
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
