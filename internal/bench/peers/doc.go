// Package peers runs other exact-search libraries on the data and queries of
// a cmd/bench run, so that umbra's figures stand next to theirs, measured on
// the same machine in the same run: chromem-go in process, and FAISS
// IndexFlatIP / IndexFlatL2 through faiss_flat.py under a system Python
// (optional: when Python cannot import faiss and numpy, the peer is skipped
// with the install command). Each peer answers with engine.Hit values so the
// harness checks them against its float64 reference like its own tiers.
package peers
