#include "base/startup.h"

#include <fcntl.h>
#include <link.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <string>
#include <string_view>

#ifndef MADV_POPULATE_READ
#define MADV_POPULATE_READ 22  // Linux 5.14; Debian 12's headers have it, older ones may not.
#endif

namespace forkbox {
namespace {

struct Walk {
  int objects = 0;   // dl_iterate_phdr lists the executable first.
  int segments = 0;  // Executable segments advised.
  int err = 0;       // The first madvise errno.
};

bool IsLibc(std::string_view name) {
  const size_t slash = name.rfind('/');
  return name.substr(slash == std::string_view::npos ? 0 : slash + 1) == "libc.so.6";
}

int AdviseCode(dl_phdr_info* info, size_t, void* data) {
  Walk& walk = *static_cast<Walk*>(data);
  const bool executable = walk.objects++ == 0;
  if (!executable && !IsLibc(info->dlpi_name ? info->dlpi_name : "")) return 0;
  const uintptr_t page = 4096;
  for (int i = 0; i < info->dlpi_phnum; ++i) {
    const ElfW(Phdr)& ph = info->dlpi_phdr[i];
    if (ph.p_type != PT_LOAD || (ph.p_flags & PF_X) == 0 || ph.p_memsz == 0) continue;
    const uintptr_t start = (info->dlpi_addr + ph.p_vaddr) & ~(page - 1);
    const uintptr_t end = (info->dlpi_addr + ph.p_vaddr + ph.p_memsz + page - 1) & ~(page - 1);
    ++walk.segments;
    if (::madvise(reinterpret_cast<void*>(start), end - start, MADV_POPULATE_READ) != 0 &&
        walk.err == 0) {
      walk.err = errno;
    }
  }
  return 0;
}

}  // namespace

Status PrefaultCode() {
  Walk walk;
  dl_iterate_phdr(AdviseCode, &walk);
  if (walk.err != 0) return Status::FromErrno(walk.err, "madvise(MADV_POPULATE_READ)");
  if (walk.segments == 0) return Status::Error(Status::Code::kNotFound, "no code segment found");
  return Status::Ok();
}

Status ReserveStandardFds() {
  for (int fd = 0; fd <= 2; ++fd) {
    if (fcntl(fd, F_GETFD) >= 0 || errno != EBADF) continue;
    // The lowest free number: `fd` itself, as the lower ones are open. Not O_CLOEXEC: it stays
    // the process's fd 0-2 across exec too.
    const int opened = open("/dev/null", O_RDONLY);
    if (opened < 0) {
      return Status::FromErrno(errno, "open /dev/null for a closed fd " + std::to_string(fd));
    }
    if (opened != fd) {
      close(opened);
      return Status::Internal("/dev/null opened as fd " + std::to_string(opened) + ", not " +
                              std::to_string(fd));
    }
  }
  return Status::Ok();
}

}  // namespace forkbox
