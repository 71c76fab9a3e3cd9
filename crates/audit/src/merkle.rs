//! The Merkle tree of the audit log (RFC 6962 §2.1, RFC 9162 §2.1): every line of a chain
//! segment is a leaf, in the order of the log; which bytes of a line are its leaf is the
//! chain's to say (`chain::Sealed::leaf`: the line without its `event.hash` member, or, for
//! lines written before scheme 2, the line as written).
//!
//! leaf hash = SHA-256(0x00 || leaf), node hash = SHA-256(0x01 || left || right), the root of
//! the empty tree is SHA-256 of nothing. The writer keeps only the tree's right edge
//! ([`Tree`], O(log n) hashes); `audit prove` and `audit consistency` read every leaf of the
//! files given and compute the proofs ([`inclusion_proof`], [`consistency_proof`]), which a
//! receiver checks with [`verify_inclusion`] and [`verify_consistency`] (RFC 9162 §2.1.3.2,
//! §2.1.4.2).

use base64ct::{Base64, Encoding};
use sha2::{Digest, Sha256};

/// A hash of the tree.
pub type Hash = [u8; 32];

/// The hash of a leaf.
pub(crate) fn leaf_hash(leaf: &[u8]) -> Hash {
    let mut h = Sha256::new();
    h.update([0u8]);
    h.update(leaf);
    h.finalize().into()
}

/// The hash of an inner node.
pub(crate) fn node_hash(left: &Hash, right: &Hash) -> Hash {
    let mut h = Sha256::new();
    h.update([1u8]);
    h.update(left);
    h.update(right);
    h.finalize().into()
}

/// The root of the empty tree.
pub(crate) fn empty_root() -> Hash {
    Sha256::digest([]).into()
}

/// A hash in base64 (standard, padded, as in a checkpoint's root line).
pub fn encode(hash: &Hash) -> String {
    Base64::encode_string(hash)
}

/// A hash from base64 (standard, padded).
pub fn decode(text: &str) -> Option<Hash> {
    Base64::decode_vec(text).ok()?.try_into().ok()
}

/// The right edge of a tree: its size, and the roots of its perfect subtrees from the
/// largest (leftmost) to the smallest, one per bit set in the size.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Tree {
    size: u64,
    edge: Vec<Hash>,
}

impl Tree {
    /// The tree of `size` leaves whose right edge is `edge`, if they go together.
    pub(crate) fn from_edge(size: u64, edge: Vec<Hash>) -> Option<Tree> {
        (edge.len() == size.count_ones() as usize).then_some(Tree { size, edge })
    }

    /// The number of leaves.
    pub(crate) fn size(&self) -> u64 {
        self.size
    }

    /// The right edge (see [`Tree`]).
    pub(crate) fn edge(&self) -> &[Hash] {
        &self.edge
    }

    /// Appends a leaf by its hash.
    pub(crate) fn push_hash(&mut self, leaf: Hash) {
        let mut hash = leaf;
        let mut size = self.size;
        while size & 1 == 1 {
            // A full subtree on the left of the same height: they merge.
            let left = self.edge.pop().unwrap_or_default();
            hash = node_hash(&left, &hash);
            size >>= 1;
        }
        self.edge.push(hash);
        self.size += 1;
    }

    /// The root hash.
    pub(crate) fn root(&self) -> Hash {
        let mut hashes = self.edge.iter().rev();
        let Some(last) = hashes.next() else { return empty_root() };
        hashes.fold(*last, |right, left| node_hash(left, &right))
    }
}

/// The largest power of two smaller than `n` (n > 1).
fn split(n: usize) -> usize {
    let mut k = 1;
    while k << 1 < n {
        k <<= 1;
    }
    k
}

/// The root of the tree over `leaves` (leaf hashes): RFC 6962 MTH.
pub(crate) fn root_of(leaves: &[Hash]) -> Hash {
    let mut tree = Tree::default();
    for leaf in leaves {
        tree.push_hash(*leaf);
    }
    tree.root()
}

/// The inclusion proof of leaf `index` in the tree over `leaves` (RFC 6962 PATH), from the
/// leaf up. `None` when `index` is not in the tree.
pub fn inclusion_proof(index: usize, leaves: &[Hash]) -> Option<Vec<Hash>> {
    (index < leaves.len()).then(|| path(index, leaves))
}

fn path(m: usize, d: &[Hash]) -> Vec<Hash> {
    if d.len() <= 1 {
        return Vec::new();
    }
    let k = split(d.len());
    if m < k {
        let mut p = path(m, &d[..k]);
        p.push(root_of(&d[k..]));
        p
    } else {
        let mut p = path(m - k, &d[k..]);
        p.push(root_of(&d[..k]));
        p
    }
}

/// The consistency proof from the tree of the first `old` leaves to the tree over `leaves`
/// (RFC 6962 PROOF). `None` unless 0 < old <= leaves.len().
pub fn consistency_proof(old: usize, leaves: &[Hash]) -> Option<Vec<Hash>> {
    (old > 0 && old <= leaves.len()).then(|| subproof(old, leaves, true))
}

fn subproof(m: usize, d: &[Hash], b: bool) -> Vec<Hash> {
    let n = d.len();
    if m == n {
        return if b { Vec::new() } else { vec![root_of(d)] };
    }
    let k = split(n);
    if m <= k {
        let mut p = subproof(m, &d[..k], b);
        p.push(root_of(&d[k..]));
        p
    } else {
        let mut p = subproof(m - k, &d[k..], false);
        p.push(root_of(&d[..k]));
        p
    }
}

/// Whether `proof` proves leaf `leaf` at `index` in the tree of `size` leaves with root
/// `root` (RFC 9162 §2.1.3.2).
pub fn verify_inclusion(index: u64, size: u64, leaf: &Hash, proof: &[Hash], root: &Hash) -> bool {
    if index >= size {
        return false;
    }
    let (mut fn_, mut sn) = (index, size - 1);
    let mut r = *leaf;
    for p in proof {
        if sn == 0 {
            return false;
        }
        if fn_ & 1 == 1 || fn_ == sn {
            r = node_hash(p, &r);
            if fn_ & 1 == 0 {
                while fn_ & 1 == 0 && fn_ != 0 {
                    fn_ >>= 1;
                    sn >>= 1;
                }
            }
        } else {
            r = node_hash(&r, p);
        }
        fn_ >>= 1;
        sn >>= 1;
    }
    sn == 0 && r == *root
}

/// Whether `proof` proves that the tree of `old` leaves with root `old_root` is a prefix of
/// the tree of `new` leaves with root `new_root` (RFC 9162 §2.1.4.2).
pub fn verify_consistency(
    old: u64,
    new: u64,
    old_root: &Hash,
    new_root: &Hash,
    proof: &[Hash],
) -> bool {
    if old > new {
        return false;
    }
    if old == new {
        return proof.is_empty() && old_root == new_root;
    }
    if old == 0 {
        // Every tree extends the empty one.
        return proof.is_empty();
    }
    let mut proof: Vec<Hash> = proof.to_vec();
    if old.is_power_of_two() {
        proof.insert(0, *old_root);
    }
    let Some((first, rest)) = proof.split_first() else { return false };
    let (mut fn_, mut sn) = (old - 1, new - 1);
    while fn_ & 1 == 1 {
        fn_ >>= 1;
        sn >>= 1;
    }
    let (mut fr, mut sr) = (*first, *first);
    for c in rest {
        if sn == 0 {
            return false;
        }
        if fn_ & 1 == 1 || fn_ == sn {
            fr = node_hash(c, &fr);
            sr = node_hash(c, &sr);
            if fn_ & 1 == 0 {
                while fn_ & 1 == 0 && fn_ != 0 {
                    fn_ >>= 1;
                    sn >>= 1;
                }
            }
        } else {
            sr = node_hash(&sr, c);
        }
        fn_ >>= 1;
        sn >>= 1;
    }
    fr == *old_root && sr == *new_root && sn == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hex(h: &Hash) -> String {
        h.iter().map(|b| format!("{b:02x}")).collect()
    }

    /// The leaves of the RFC 6962 test tree (Certificate Transparency's merkle_tree_test).
    fn ct_leaves() -> Vec<Vec<u8>> {
        [
            "",
            "00",
            "10",
            "2021",
            "3031",
            "40414243",
            "5051525354555657",
            "606162636465666768696a6b6c6d6e6f",
        ]
        .iter()
        .map(|h| {
            (0..h.len()).step_by(2).map(|i| u8::from_str_radix(&h[i..i + 2], 16).unwrap()).collect()
        })
        .collect()
    }

    #[test]
    fn the_roots_match_the_rfc_6962_test_vectors() {
        assert_eq!(
            hex(&empty_root()),
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
        );
        assert_eq!(
            hex(&leaf_hash(b"")),
            "6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d"
        );
        let want = [
            "6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d",
            "fac54203e7cc696cf0dfcb42c92a1d9dbaf70ad9e621f4bd8d98662f00e3c125",
            "aeb6bcfe274b70a14fb067a5e5578264db0fa9b51af5e0ba159158f329e06e77",
            "d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7",
            "4e3bbb1f7b478dcfe71fb631631519a3bca12c9aefca1612bfce4c13a86264d4",
            "76e67dadbcdf1e10e1b74ddc608abd2f98dfb16fbce75277b5232a127f2087ef",
            "ddb89be403809e325750d3d263cd78929c2942b7942a34b77e122c9594a74c8c",
            "5dc9da79a70659a9ad559cb701ded9a2ab9d823aad2f4960cfe370eff4604328",
        ];
        let mut tree = Tree::default();
        let mut hashes = Vec::new();
        for (leaf, want) in ct_leaves().iter().zip(want) {
            tree.push_hash(leaf_hash(leaf));
            hashes.push(leaf_hash(leaf));
            assert_eq!(hex(&tree.root()), want, "size {}", tree.size());
            assert_eq!(hex(&root_of(&hashes)), want);
            let again = Tree::from_edge(tree.size(), tree.edge().to_vec()).unwrap();
            assert_eq!(again.root(), tree.root());
        }
        assert!(Tree::from_edge(3, vec![[0; 32]]).is_none());
    }

    #[test]
    fn inclusion_and_consistency_proofs_verify_and_catch_changes() {
        let leaves: Vec<Hash> = (0..37u32).map(|i| leaf_hash(&i.to_be_bytes())).collect();
        for n in 1..=leaves.len() {
            let d = &leaves[..n];
            let root = root_of(d);
            for i in 0..n {
                let proof = inclusion_proof(i, d).unwrap();
                assert!(verify_inclusion(i as u64, n as u64, &d[i], &proof, &root), "{i} in {n}");
                let other = leaf_hash(b"forged");
                assert!(!verify_inclusion(i as u64, n as u64, &other, &proof, &root));
                if n > 1 {
                    let j = (i + 1) % n;
                    assert!(!verify_inclusion(j as u64, n as u64, &d[i], &proof, &root));
                }
            }
            for m in 1..=n {
                let proof = consistency_proof(m, d).unwrap();
                let old = root_of(&d[..m]);
                assert!(verify_consistency(m as u64, n as u64, &old, &root, &proof), "{m}->{n}");
                if m < n {
                    let wrong = root_of(&leaves[1..=m]);
                    assert!(!verify_consistency(m as u64, n as u64, &wrong, &root, &proof));
                }
            }
        }
        // The RFC 6962 test tree: the proof of leaf 0 in 8 and consistency 4 -> 8.
        let d: Vec<Hash> = ct_leaves().iter().map(|l| leaf_hash(l)).collect();
        let p = inclusion_proof(0, &d).unwrap();
        assert_eq!(
            p.iter().map(hex).collect::<Vec<_>>(),
            [
                "96a296d224f285c67bee93c30f8a309157f0daa35dc5b87e410b78630a09cfc7",
                "5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e",
                "6b47aaf29ee3c2af9af889bc1fb9254dabd31177f16232dd6aab035ca39bf6e4",
            ]
        );
        let c = consistency_proof(4, &d).unwrap();
        assert_eq!(
            c.iter().map(hex).collect::<Vec<_>>(),
            ["6b47aaf29ee3c2af9af889bc1fb9254dabd31177f16232dd6aab035ca39bf6e4"]
        );
    }
}
