// Package host reads and writes the vector files users bring to umbra, as
// one row-major Matrix (its Data ready for umbra.Flat), or a piece at a
// time (OpenMatrixFile, a MatrixReader, itself an umbra.RowSource); float16
// files are widened to float32 exactly as they are read.
//
// What each reader accepts, chosen by ReadMatrixFile and ReadIDsFile from the
// extension (case-insensitive), or by ReadMatrix from the format its caller
// names (a stream: stdin, a request body):
//
//   - .npy: format 1.0, 2.0 or 3.0, C order, 2-D (rows, dim) with
//     dim > 0, little-endian float32 '<f4' or float16 '<f2' (widened
//     exactly). Refused: any other dtype (float64, integers, big-endian,
//     structured), Fortran order, other ranks, headers over 1 MiB or not a
//     dict of exactly descr, fortran_order and shape, and in a file, bytes
//     after the payload.
//   - .npy of IDs (ReadIDs, ReadIDsFile): 1-D, '<i8' or '<u8'; a negative
//     int64 is refused, naming its index.
//   - .fvecs, .bvecs, .ivecs: records of an int32 dim and that many
//     float32, uint8 (read as float32) or int32 values. Every record must
//     have the same positive dim; an empty file is refused (it has no dim).
//     .ivecs is integer data: ReadIDsFile reads one of dim 1 as IDs, and
//     ReadMatrixFile and ReadMatrix refuse it.
//
// NaN and infinities load as stored: the engine, not the reader, rejects
// them. Every refusal wraps ErrFormat and names the file and the problem,
// with the vector index and byte offset where one applies.
//
// Readers never trust a header. A regular file's claims are checked against
// its size before anything is allocated for them; a source of unknown size
// (a FIFO, stdin) is read in pieces of at most 1 MiB, memory following the
// bytes that actually arrive, and past DefaultMaxStreamBytes (or
// MaxStreamBytes) the read fails with ErrTooLarge. Every reader takes a
// context and checks it between pieces.
//
// Writers (WriteMatrix to a stream, WriteMatrixFile to a path) write .npy
// (float32 or float16) and .fvecs. WriteMatrixFile replaces a file
// atomically: a temporary file beside the target, fsynced, renamed into
// place, the directory fsynced; permissions of an existing file kept,
// symlinks written through.
package host
