#include "parent/line_editor.h"

#include <fcntl.h>
#include <histedit.h>
#include <langinfo.h>
#include <locale.h>
#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <termios.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <cwchar>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>

#include "base/file.h"
#include "parent/signals.h"
#include "parent/terminal.h"

namespace forkbox::parent {
namespace {

constexpr size_t kMaxHistoryFileBytes = size_t{64} << 20;
constexpr char kPrompt[] = "forkbox> ";
constexpr char kContinuation[] = "     ... ";
constexpr char kPasteStart[] = "\x1b[200~";
constexpr char kPasteEnd[] = "\x1b[201~";
constexpr size_t kMaxPasteBytes = size_t{4} << 20;
constexpr char kCtrlD = '\x04';

void WriteRaw(int fd, std::string_view s) {
  while (!s.empty()) {
    ssize_t n = ::write(fd, s.data(), s.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;  // The terminal is gone: the next read says so.
    s.remove_prefix(static_cast<size_t>(n));
  }
}

// A line ending in an unescaped `\` continues: true, with the backslash removed.
bool TakeContinuation(std::string* line) {
  if (line->empty() || line->back() != '\\') return false;
  line->pop_back();
  return true;
}

// ---- without a terminal: today's plain lines

class PlainReader : public LineEditor {
 public:
  PlainReader(int in_fd, int out_fd) : in_fd_(in_fd), out_fd_(out_fd) {}
  PromptInput Read() override;

 private:
  int in_fd_;
  int out_fd_;
};

PromptInput PlainReader::Read() {
  std::string line;
  WriteText(out_fd_, kPrompt);
  while (true) {
    char c;
    ssize_t n = ::read(in_fd_, &c, 1);
    if (n < 0 && errno == EINTR) {
      const int sig = TakeInterrupt();
      if (sig == 0) continue;
      if (sig != SIGINT) return {PromptInput::Kind::kInterrupted, "", sig};
      WriteText(out_fd_, line.empty() ? std::string("^C ") + kQuitHint + "\n" : "^C\n");
      line.clear();
      WriteText(out_fd_, kPrompt);
      continue;
    }
    if (n <= 0) {
      if (!line.empty()) return {PromptInput::Kind::kPrompt, line, 0};
      WriteText(out_fd_, "\n");
      return {};
    }
    if (c == '\n') return {PromptInput::Kind::kPrompt, line, 0};
    line.push_back(c);
  }
}

// ---- on a terminal: libedit

// Pasted text as the prompt takes it: CR and CRLF become LF (terminals send Enter as CR), other
// control bytes but tab are dropped (a paste must not carry escape sequences into the prompt).
std::string CleanPaste(const std::string& raw) {
  std::string out;
  for (size_t i = 0; i < raw.size(); ++i) {
    const auto c = static_cast<unsigned char>(raw[i]);
    if (c == '\r') {
      out.push_back('\n');
      if (i + 1 < raw.size() && raw[i + 1] == '\n') ++i;
    } else if (c >= 0x20 || c == '\n' || c == '\t') {
      if (c != 0x7f) out.push_back(static_cast<char>(c));
    }
  }
  return out;
}

// The editor's LC_CTYPE: the user's when its codeset is UTF-8, else C.UTF-8, so that UTF-8 input
// reaches the model intact whatever the locale (libedit decodes it with the locale, and a C locale
// drops every non-ASCII byte). Null when neither exists: the process's locale applies.
locale_t NewEditorLocale() {
  if (locale_t user = ::newlocale(LC_CTYPE_MASK, "", static_cast<locale_t>(0)); user != nullptr) {
    if (std::strcmp(::nl_langinfo_l(CODESET, user), "UTF-8") == 0) return user;
    ::freelocale(user);
  }
  return ::newlocale(LC_CTYPE_MASK, "C.UTF-8", static_cast<locale_t>(0));
}

// Makes `loc` the calling thread's locale while it lives (null: leaves it alone).
class ScopedLocale {
 public:
  explicit ScopedLocale(locale_t loc) : old_(loc != nullptr ? ::uselocale(loc) : nullptr) {}
  ~ScopedLocale() {
    if (old_ != nullptr) ::uselocale(old_);
  }
  ScopedLocale(const ScopedLocale&) = delete;
  ScopedLocale& operator=(const ScopedLocale&) = delete;

 private:
  locale_t old_;
};

class EditlineEditor : public LineEditor {
 public:
  EditlineEditor(int in_fd, int out_fd)
      : in_fd_(in_fd), out_fd_(out_fd), bracketed_paste_(TakesCursorControls(out_fd)) {}
  ~EditlineEditor() override;
  // Sets up libedit and the terminal; false when libedit cannot run here.
  bool Init(std::vector<std::string> history, std::optional<HistoryFile> file);
  PromptInput Read() override;

 private:
  static char* PromptOf(EditLine* el);
  static int GetChar(EditLine* el, wchar_t* out);
  int ReadChar(wchar_t* out);
  bool WaitReadable();
  static unsigned char OnPaste(EditLine* el, int ch);
  unsigned char Paste();
  // Reads the pasted bytes up to and without the end marker; false when an interrupt, a hang-up
  // or a Ctrl-D typed into it (paste_eof_) ended the paste first.
  bool ReadPaste(std::string* raw);
  // True when the terminal has a byte waiting right now.
  bool MoreInput() const;
  void Remember(const std::string& prompt);
  std::string ShowPaste(const std::string& pasted);
  // Outside libedit's reads: no echo and no kernel line editing (see the header). Notes a
  // terminal that is gone (EIO) in hung_up_.
  void QuietTerminal();
  // Inside libedit's read, after a stop (JobStopsEnded): the editor's mode and the paste mode
  // back, the prompt and the line redrawn.
  void Resume();

  int in_fd_;
  int out_fd_;
  // Asked of the terminal: not of TERM=dumb (Emacs' M-x shell), which shows the request as text.
  bool bracketed_paste_;
  EditLine* el_ = nullptr;
  History* history_ = nullptr;
  std::optional<HistoryFile> file_;
  std::optional<termios> saved_;
  bool continuing_ = false;            // The prompt shown is the continuation prompt.
  std::optional<std::string> pasted_;  // A paste with newlines ended the current line.
  bool hung_up_ = false;               // A read saw the terminal gone (EOF or EIO).
  bool paste_eof_ = false;             // A Ctrl-D typed into a paste: the end of input.
  locale_t locale_ = nullptr;          // NewEditorLocale(); null: the process's.
  uint32_t stops_seen_ = 0;            // JobStopsEnded() when last looked at.
};

EditlineEditor::~EditlineEditor() {
  ClearIdleTerminal();  // The terminal goes back to how it was found; a continue leaves it so.
  if (bracketed_paste_) WriteRaw(out_fd_, "\x1b[?2004l");    // Bracketed paste off.
  if (saved_) (void)::tcsetattr(in_fd_, TCSANOW, &*saved_);  // Best effort: we are leaving.
  if (el_ != nullptr) el_end(el_);
  if (history_ != nullptr) history_end(history_);
  if (locale_ != nullptr) ::freelocale(locale_);
}

char* EditlineEditor::PromptOf(EditLine* el) {
  void* self = nullptr;
  el_get(el, EL_CLIENTDATA, &self);
  const bool cont = self != nullptr && static_cast<EditlineEditor*>(self)->continuing_;
  return const_cast<char*>(cont ? kContinuation : kPrompt);
}

int EditlineEditor::GetChar(EditLine* el, wchar_t* out) {
  void* self = nullptr;
  el_get(el, EL_CLIENTDATA, &self);
  return static_cast<EditlineEditor*>(self)->ReadChar(out);
}

// Waits until the terminal has a byte; false when an interrupt is pending. Race-free: the
// interrupt signals are blocked between the check and the wait, which ppoll unblocks atomically
// (a Ctrl-C just before a plain read() would be seen only at the next keystroke).
bool EditlineEditor::WaitReadable() {
  sigset_t block, old;
  sigemptyset(&block);
  for (int sig : kInterruptSignals) sigaddset(&block, sig);
  // A job stop and its end come in the wait too (the handlers run there): a continue seen just
  // before it would wait for the next key to redraw.
  for (int sig : {SIGCONT, SIGTSTP, SIGTTIN, SIGTTOU}) sigaddset(&block, sig);
  if (::sigprocmask(SIG_BLOCK, &block, &old) != 0) return !InterruptPending();
  bool readable = true;
  while (true) {
    if (InterruptPending()) {
      readable = false;
      break;
    }
    if (const uint32_t stops = JobStopsEnded(); stops != stops_seen_) {
      stops_seen_ = stops;
      Resume();
    }
    struct pollfd p = {in_fd_, POLLIN, 0};
    const int n = ::ppoll(&p, 1, nullptr, &old);
    if (n > 0 || (n < 0 && errno != EINTR)) break;  // The read says what it is.
  }
  ::sigprocmask(SIG_SETMASK, &old, nullptr);
  return readable;
}

// libedit's read function: one character, decoded with the locale (as libedit's own does).
// -1 with EINTR when an interrupt is pending, -1 with EIO once the terminal is gone.
int EditlineEditor::ReadChar(wchar_t* out) {
  char buf[MB_LEN_MAX];
  size_t len = 0;
  *out = L'\0';
  while (true) {
    if (!WaitReadable()) {
      errno = EINTR;
      return -1;
    }
    const ssize_t n = ::read(in_fd_, buf + len, 1);
    if (n < 0 && errno == EINTR) continue;
    if (n == 0 || (n < 0 && errno == EIO)) {
      // A terminal in the editor's raw mode reads 0 or EIO only once it is gone (Ctrl-D is a
      // byte): a hang-up, whether or not SIGHUP was recorded yet.
      hung_up_ = true;
      errno = EIO;
      return -1;
    }
    if (n < 0) return -1;
    ++len;
    mbstate_t state = {};
    const size_t r = std::mbrtowc(out, buf, len, &state);
    if (r == static_cast<size_t>(-2) && len < sizeof(buf)) continue;  // More bytes to come.
    if (r == static_cast<size_t>(-1) || r == static_cast<size_t>(-2)) {
      len = 0;  // Not a character: dropped, as libedit does.
      continue;
    }
    return 1;
  }
}

unsigned char EditlineEditor::OnPaste(EditLine* el, int) {
  void* self = nullptr;
  el_get(el, EL_CLIENTDATA, &self);
  return self == nullptr ? CC_ERROR : static_cast<EditlineEditor*>(self)->Paste();
}

bool EditlineEditor::MoreInput() const {
  struct pollfd p = {in_fd_, POLLIN, 0};
  return ::poll(&p, 1, 0) > 0;
}

bool EditlineEditor::ReadPaste(std::string* raw) {
  const std::string end = kPasteEnd;
  size_t dropped = 0;  // Beyond kMaxPasteBytes: read to the end marker, but not kept.
  bool ended = true;
  while (raw->size() < end.size() || raw->compare(raw->size() - end.size(), end.size(), end) != 0) {
    // A paste whose end marker never comes must not hold off Ctrl-C, SIGTERM or SIGHUP.
    if (!WaitReadable()) {
      ended = false;
      break;
    }
    char c;
    const ssize_t n = ::read(in_fd_, &c, 1);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      hung_up_ = n == 0 || errno == EIO;
      ended = false;
      break;
    }
    if (c == kCtrlD && !MoreInput()) {
      // Typed, not pasted: a paste comes in a burst. The user ends the input, as at a prompt.
      paste_eof_ = true;
      ended = false;
      break;
    }
    raw->push_back(c);
    if (raw->size() > kMaxPasteBytes + end.size()) {
      raw->erase(kMaxPasteBytes, 1);
      ++dropped;
    }
  }
  if (dropped > 0) {
    WriteText(out_fd_,
              "\nforkbox: the paste was cut to " + std::to_string(kMaxPasteBytes) + " bytes\n");
  }
  if (ended) raw->resize(raw->size() - end.size());
  return ended;
}

// Bound to the paste-start sequence: reads the pasted bytes up to the end marker straight from
// the terminal (libedit reads one byte at a time, so nothing of them is buffered elsewhere).
unsigned char EditlineEditor::Paste() {
  std::string raw;
  if (!ReadPaste(&raw)) {
    // Read() takes the interrupt or the hang-up and drops the paste with the line.
    pasted_ = std::string();
    return CC_NEWLINE;
  }
  const std::string text = CleanPaste(raw);
  if (text.empty()) return CC_REFRESH;
  if (text.find('\n') == std::string::npos) {
    if (el_insertstr(el_, text.c_str()) == 0) return CC_REFRESH;
    // libedit could not take it (not text in the editor's locale, or too long): the paste is
    // kept whole as if it had several lines, shown above the prompt, rather than lost.
    WriteText(out_fd_, "\nforkbox: the editor could not insert the paste; it is kept as is\n");
  }
  const LineInfo* li = el_line(el_);
  pasted_ = std::string(li->buffer, li->cursor) + text + std::string(li->cursor, li->lastchar);
  return CC_NEWLINE;
}

bool EditlineEditor::Init(std::vector<std::string> entries, std::optional<HistoryFile> file) {
  // libedit decodes input with the locale's multibyte functions: UTF-8 needs a UTF-8 LC_CTYPE.
  locale_ = NewEditorLocale();
  if (locale_ == nullptr) {
    WriteText(out_fd_, "forkbox: warning: no UTF-8 locale (C.UTF-8); non-ASCII input is lost\n");
  }
  ScopedLocale in_locale(locale_);
  termios t;
  if (::tcgetattr(in_fd_, &t) == 0) saved_ = t;
  history_ = history_init();
  el_ = el_init("forkbox", stdin, stderr, stderr);
  if (history_ == nullptr || el_ == nullptr) return false;
  HistEvent ev;
  history(history_, &ev, H_SETSIZE, static_cast<int>(HistoryFile::kMaxEntries));
  history(history_, &ev, H_SETUNIQUE, 1);
  for (const std::string& e : entries) history(history_, &ev, H_ENTER, e.c_str());
  file_ = std::move(file);
  const bool set =
      el_set(el_, EL_CLIENTDATA, this) == 0 && el_set(el_, EL_EDITOR, "emacs") == 0 &&
      // The parent's own handlers stay in charge (parent/signals.h).
      el_set(el_, EL_SIGNAL, 0) == 0 && el_set(el_, EL_PROMPT, &EditlineEditor::PromptOf) == 0 &&
      el_set(el_, EL_GETCFN, &EditlineEditor::GetChar) == 0 &&
      el_set(el_, EL_HIST, history, history_) == 0 &&
      el_set(el_, EL_ADDFN, "forkbox-paste", "take a bracketed paste as text", &OnPaste) == 0 &&
      el_set(el_, EL_BIND, kPasteStart, "forkbox-paste", nullptr) == 0 &&
      el_set(el_, EL_BIND, "^R", "em-inc-search-prev", nullptr) == 0 &&
      // CR and LF reach the editor as typed, so that a paste's CRLF is told from a blank line.
      el_set(el_, EL_SETTY, "-d", "-icrnl", "-inlcr", "-igncr", nullptr) == 0;
  if (!set) return false;
  stops_seen_ = JobStopsEnded();
  if (Status st = InstallContinueHandler(); !st.ok()) {
    WriteText(out_fd_, "forkbox: warning: the prompt is not redrawn after Ctrl-Z and fg: " +
                           st.ToString() + "\n");
  }
  // From now on keystrokes wait raw for the editor: the kernel's line editing never sees them
  // (libedit enters its own mode only when it reads, after it drew the prompt).
  QuietTerminal();
  if (bracketed_paste_) WriteRaw(out_fd_, "\x1b[?2004h");  // Bracketed paste on.
  return true;
}

void EditlineEditor::Remember(const std::string& prompt) {
  HistEvent ev;
  history(history_, &ev, H_ENTER, prompt.c_str());
  if (!file_) return;
  if (Status st = file_->Append(prompt); !st.ok()) {
    WriteText(out_fd_, "forkbox: warning: history not saved: " + st.ToString() + "\n");
    file_.reset();  // Said once.
  }
}

void EditlineEditor::QuietTerminal() {
  termios t;
  if (::tcgetattr(in_fd_, &t) != 0) {
    // libedit met the hang-up first (its own tcgetattr failed, so el_gets said end of input).
    if (errno == EIO) hung_up_ = true;
    return;
  }
  // Non-canonical too: what is typed ahead (Ctrl-D and Ctrl-U included) waits untouched for the
  // editor instead of being line-edited by the kernel. ISIG stays: Ctrl-C still interrupts.
  t.c_lflag &= ~static_cast<tcflag_t>(ECHO | ICANON);
  // CR stays CR (as in the editor's own mode): a paste typed ahead keeps its CRLF apart from LF LF.
  t.c_iflag &= ~static_cast<tcflag_t>(ICRNL | INLCR | IGNCR);
  t.c_cc[VMIN] = 1;
  t.c_cc[VTIME] = 0;
  // Best effort: if the terminal refuses, type-ahead is merely echoed as before.
  (void)::tcsetattr(in_fd_, TCSANOW, &t);
  SetIdleTerminal(in_fd_, out_fd_, t, bracketed_paste_);  // Put back after a job stop too.
}

// The shell that had the terminal while we were stopped left it in its own mode (cooked and
// echoing: each key would show twice, and edit only at Enter) with bracketed paste off (a
// multi-line paste would be sent line by line, each line a prompt), and the cursor on a line of
// its own. libedit keeps its mode in mind: cooked first, so that entering its mode again applies
// it, and the terminal's mode now is taken as the one to go back to.
void EditlineEditor::Resume() {
  (void)el_set(el_, EL_PREP_TERM, 0);
  (void)el_set(el_, EL_PREP_TERM, 1);
  if (bracketed_paste_) WriteRaw(out_fd_, "\x1b[?2004h");
  (void)el_set(el_, EL_REFRESH);
}

// Shows a paste with newlines as pasted, the prompt going on below it; returns its text.
std::string EditlineEditor::ShowPaste(const std::string& pasted) {
  std::string shown = pasted;
  if (!shown.empty() && shown.back() == '\n') shown.pop_back();
  std::string screen = continuing_ ? kContinuation : kPrompt;
  for (char c : shown) screen += c == '\n' ? std::string("\n") + kContinuation : std::string(1, c);
  WriteRaw(out_fd_, "\r\x1b[J");
  WriteText(out_fd_, screen + "\n");
  return shown + "\n";
}

PromptInput EditlineEditor::Read() {
  ScopedLocale in_locale(locale_);
  std::string text;
  continuing_ = false;
  // A stop while the session worked: the continue put the idle terminal back, and el_gets draws
  // the prompt anew (a redraw in the wait would draw it twice).
  ClearIdleTerminal();
  stops_seen_ = JobStopsEnded();
  while (true) {
    pasted_.reset();
    int count = 0;
    const char* got = el_gets(el_, &count);
    QuietTerminal();  // libedit restored the cooked mode; keystrokes must wait for it, unedited.
    if (hung_up_) {
      // The terminal is gone: SIGHUP's end, whether or not the signal was recorded yet.
      const int sig = TakeInterrupt();
      return {PromptInput::Kind::kInterrupted, "", sig == SIGTERM ? sig : SIGHUP};
    }
    if (const int sig = pasted_ ? TakeInterrupt() : 0; sig != 0) {
      if (sig != SIGINT) return {PromptInput::Kind::kInterrupted, "", sig};
      WriteText(out_fd_, "\n");  // Ctrl-C during the paste: it is dropped with the line.
      text.clear();
      continuing_ = false;
      continue;
    }
    if (pasted_ && paste_eof_) {
      WriteText(out_fd_, "\n");  // The paste is dropped with the line, as Ctrl-C drops it.
      return {};
    }
    if (pasted_) {
      text += ShowPaste(*pasted_);
      continuing_ = true;
      continue;
    }
    if (got == nullptr && count == -1) {
      const int err = errno;
      const int sig = TakeInterrupt();
      if (sig == 0 && err != EINTR && err != 0) return {};  // The terminal failed: the end.
      if (sig == 0) continue;
      if (sig != SIGINT) return {PromptInput::Kind::kInterrupted, "", sig};
      const LineInfo* li = el_line(el_);
      const bool empty = text.empty() && li->lastchar == li->buffer;
      WriteText(out_fd_, empty ? std::string("\n") + kQuitHint + "\n" : "\n");
      text.clear();
      continuing_ = false;
      continue;
    }
    if (got == nullptr) {
      WriteText(out_fd_, "\n");
      return {};
    }
    std::string line = got;
    while (!line.empty() && (line.back() == '\n' || line.back() == '\r')) line.pop_back();
    const bool more = TakeContinuation(&line);
    text += line;
    if (more) {
      text += "\n";
      continuing_ = true;
      continue;
    }
    while (!text.empty() && text.back() == '\n') text.pop_back();
    if (text.find_first_not_of(" \t\n") != std::string::npos) Remember(text);
    return {PromptInput::Kind::kPrompt, text, 0};
  }
}

// The entries of a history file's text; unreadable lines are skipped.
std::vector<std::string> ParseHistory(const std::string& text) {
  std::vector<std::string> entries;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    nlohmann::json j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (j.is_string()) entries.push_back(j.get<std::string>());
  }
  return entries;
}

Status WriteEntries(int fd, const std::vector<std::string>& entries, size_t from) {
  std::string out;
  for (size_t i = from; i < entries.size(); ++i) {
    out +=
        nlohmann::json(entries[i]).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) +
        "\n";
  }
  size_t off = 0;
  while (off < out.size()) {
    ssize_t n = ::write(fd, out.data() + off, out.size() - off);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return Status::FromErrno(errno, "writing the history file");
    off += static_cast<size_t>(n);
  }
  return Status::Ok();
}

}  // namespace

Result<HistoryFile> HistoryFile::Open(const OwnedDir& dir, const std::string& name, bool writable,
                                      std::vector<std::string>* entries) {
  // Through no link: one planted here must not redirect the writes; O_NONBLOCK: nor a FIFO stall
  // us.
  const std::string path = dir.path + "/" + name;
  const int mode = writable ? O_RDWR | O_APPEND | O_CREAT : O_RDONLY;
  UniqueFd fd = OpenAt2(dir.fd.get(), name.c_str(), mode | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY,
                        RESOLVE_BENEATH | kResolveNoLinks, 0600);
  if (!fd && !writable && errno == ENOENT) return HistoryFile(std::move(fd));
  if (!fd) return RefusedOwnName(errno, dir.fd.get(), dir.path, name);
  struct stat st;
  if (::fstat(fd.get(), &st) != 0) return Status::FromErrno(errno, "fstat " + path);
  if (!S_ISREG(st.st_mode)) return Status::InvalidArgument(path + ": not a regular file");
  if (writable && st.st_nlink > 1) {
    return Status::PermissionDenied(path + ": a hard link (" + std::to_string(st.st_nlink) +
                                    " names), refused: its other name may lie anywhere");
  }
  if (writable && (st.st_mode & 0777) != 0600 && ::fchmod(fd.get(), 0600) != 0) {
    return Status::FromErrno(errno, "chmod " + path);
  }
  Result<std::string> text = ReadToEnd(fd.get(), kMaxHistoryFileBytes, path);
  if (!text.ok()) return text.status();
  *entries = ParseHistory(*text);
  if (writable && entries->size() > 2 * kMaxEntries) {
    entries->erase(entries->begin(), entries->end() - static_cast<std::ptrdiff_t>(kMaxEntries));
    if (::ftruncate(fd.get(), 0) != 0) return Status::FromErrno(errno, "truncate " + path);
    FORKBOX_RETURN_IF_ERROR(WriteEntries(fd.get(), *entries, 0));
  }
  return HistoryFile(std::move(fd));
}

Status HistoryFile::Append(const std::string& entry) { return WriteEntries(fd_.get(), {entry}, 0); }

std::unique_ptr<LineEditor> MakeLineEditor(const LineEditorOptions& options) {
  if (!::isatty(options.in_fd) || !::isatty(options.out_fd)) {
    return std::make_unique<PlainReader>(options.in_fd, options.out_fd);
  }
  std::vector<std::string> entries;
  std::optional<HistoryFile> file;
  if (options.history_dir != nullptr) {
    Result<HistoryFile> opened = HistoryFile::Open(*options.history_dir, options.history_name,
                                                   options.save_history, &entries);
    if (opened.ok()) {
      if (options.save_history) file.emplace(std::move(*opened));
    } else {
      WriteText(options.out_fd,
                "forkbox: warning: no prompt history: " + opened.status().ToString() + "\n");
    }
  }
  auto editor = std::make_unique<EditlineEditor>(options.in_fd, options.out_fd);
  if (!editor->Init(std::move(entries), std::move(file))) {
    WriteText(options.out_fd, "forkbox: warning: the line editor is unavailable\n");
    return std::make_unique<PlainReader>(options.in_fd, options.out_fd);
  }
  return editor;
}

}  // namespace forkbox::parent

#if defined(FORKBOX_SANITIZE)
// libedit keeps a few wcsdup'd strings (its wide-character line and prompt conversions) that
// el_end never frees; LeakSanitizer would fail every interactive run of a sanitizer build.
extern "C" const char* __lsan_default_suppressions() { return "leak:wcsdup\n"; }
#endif
