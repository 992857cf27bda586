// The file-system seam as the storage layer names it: mmdoc::File and
// mmdoc::FileSystem (mmdoc/file_system.h, public so that Options can take
// one) are storage::File and storage::FileSystem here.
#ifndef MMDOC_STORAGE_FILE_SYSTEM_H_
#define MMDOC_STORAGE_FILE_SYSTEM_H_

#include "mmdoc/file_system.h"

namespace mmdoc::storage {

using ::mmdoc::File;
using ::mmdoc::FileSystem;
using ::mmdoc::MapMode;
using ::mmdoc::OpenMode;

}  // namespace mmdoc::storage

#endif  // MMDOC_STORAGE_FILE_SYSTEM_H_
