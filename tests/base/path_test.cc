#include "base/path.h"

#include <gtest/gtest.h>

namespace forkbox {
namespace {

TEST(PathWithin, ATreeHoldsItselfAndWhatIsBelowItByWholeComponents) {
  EXPECT_TRUE(PathWithin("/a", "/a"));
  EXPECT_TRUE(PathWithin("/a/b", "/a"));
  EXPECT_TRUE(PathWithin("/a/b/c", "/a/b"));
  EXPECT_FALSE(PathWithin("/ab", "/a")) << "a prefix of a name is not a parent";
  EXPECT_FALSE(PathWithin("/a", "/a/b"));
  EXPECT_FALSE(PathWithin("/b/a", "/a"));
}

// The one answer for "/", which the copies this replaced gave differently: two counted no path
// beneath it, so with --allow-broad-workdir and a workdir of "/" the git trust-surface guard
// recorded nothing a task could write.
TEST(PathWithin, EveryAbsolutePathLiesBeneathTheRoot) {
  EXPECT_TRUE(PathWithin("/", "/"));
  EXPECT_TRUE(PathWithin("/etc", "/"));
  EXPECT_TRUE(PathWithin("/home/u/.ssh", "/"));
  EXPECT_FALSE(PathWithin("etc", "/")) << "a relative path is not below the root";
}

TEST(PathWithin, RelativePathsAndTheEmptyTree) {
  EXPECT_TRUE(PathWithin("a/b", "a"));
  EXPECT_FALSE(PathWithin("ab", "a"));
  EXPECT_FALSE(PathWithin("/a", ""));
  EXPECT_FALSE(PathWithin("", ""));
}

TEST(PathBelow, ThePartBelowTheTreeOrNothing) {
  EXPECT_EQ(PathBelow("/w/a/b", "/w"), "a/b");
  EXPECT_EQ(PathBelow("/etc/x", "/"), "etc/x");
  EXPECT_EQ(PathBelow("a/b", "a"), "b");
  EXPECT_EQ(PathBelow("/w", "/w"), std::nullopt) << "the tree itself has no part below it";
  EXPECT_EQ(PathBelow("/", "/"), std::nullopt);
  EXPECT_EQ(PathBelow("/wx/a", "/w"), std::nullopt);
  EXPECT_EQ(PathBelow("/v/a", "/w"), std::nullopt);
}

TEST(TidySeparators, RepeatedSeparatorsAndDotsGoDotDotAndATrailingSlashStay) {
  EXPECT_EQ(TidySeparators("/w//a/./b"), "/w/a/b");
  EXPECT_EQ(TidySeparators("//w///a"), "/w/a");
  EXPECT_EQ(TidySeparators("/w/a/../b"), "/w/a/../b") << "only the file system knows where .. goes";
  EXPECT_EQ(TidySeparators("/w/dir/"), "/w/dir/");
  EXPECT_EQ(TidySeparators("/w/dir/."), "/w/dir");
  EXPECT_EQ(TidySeparators("a//b/"), "a/b/");
  EXPECT_EQ(TidySeparators("///"), "/");
  EXPECT_EQ(TidySeparators("./."), ".");
}

}  // namespace
}  // namespace forkbox
