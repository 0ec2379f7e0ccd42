// The state visitor protocol: one VisitState saves and restores; loading is strict and names the
// field; lazily created state is handed over as a subtree.
#include "frugal/state_visitor.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace frugal {
namespace {

// A component with one value of every kind, visited the way components do it.
struct Component {
  uint64_t counter = 0;
  int64_t position = 0;
  double loss = 0;
  std::vector<float> fixed = std::vector<float>(3, 0.0f);
  std::vector<float> sized;
  std::vector<std::byte> blob;

  void VisitState(StateVisitor& v) {
    v.U64("counter", counter);
    StateVisitor::Scope scope(v, "fc1.weight/part");
    v.I64("position", position);
    v.F64("loss", loss);
    v.Floats("fixed", fixed);
    v.FloatVector("sized", sized);
    v.Bytes("blob", blob);
  }
};

Component Filled() {
  Component c;
  c.counter = 0xfedcba9876543210ULL;
  c.position = -42;
  c.loss = 0.125;
  c.fixed = {1.5f, -2.0f, 3.25f};
  c.sized = {7.0f, 8.0f};
  c.blob = {std::byte{1}, std::byte{0}, std::byte{255}};
  return c;
}

TEST(StateVisitor, SavedStateRestoresEveryValue) {
  Component original = Filled();
  StateSaver saver;
  original.VisitState(saver);
  ASSERT_TRUE(saver.ok()) << saver.status().ToString();
  // The scope's component is escaped: one component, whatever the tensor name holds.
  EXPECT_TRUE(saver.records().contains("fc1.weight%2Fpart/fixed"));
  EXPECT_EQ(saver.records().size(), 6u);

  Component restored;
  StateLoader loader(saver.records());
  restored.VisitState(loader);
  ASSERT_TRUE(loader.Finish().ok()) << loader.Finish().ToString();
  EXPECT_EQ(restored.counter, original.counter);
  EXPECT_EQ(restored.position, original.position);
  EXPECT_EQ(restored.loss, original.loss);
  EXPECT_EQ(restored.fixed, original.fixed);
  EXPECT_EQ(restored.sized, original.sized);
  EXPECT_EQ(restored.blob, original.blob);
}

TEST(StateVisitor, EscapingRoundTrips) {
  for (std::string name : {"", "a", "a/b", "%2F", "100%", "x/%/y//"}) {
    const std::string escaped = EscapeStateName(name);
    EXPECT_EQ(escaped.find('/'), std::string::npos) << name;
    EXPECT_EQ(UnescapeStateName(escaped), name);
  }
}

TEST(StateVisitor, SavingANameTwiceIsAnError) {
  StateSaver saver;
  uint64_t v = 1;
  saver.U64("x", v);
  saver.U64("x", v);
  EXPECT_EQ(saver.status().code(), StatusCode::kInternal);
  EXPECT_NE(saver.status().message().find("'x' saved twice"), std::string::npos);
}

StateRecords SavedComponent() {
  Component c = Filled();
  StateSaver saver;
  c.VisitState(saver);
  return saver.records();
}

TEST(StateVisitor, AMissingFieldIsNamed) {
  StateRecords records = SavedComponent();
  records.erase("fc1.weight%2Fpart/loss");
  Component c;
  StateLoader loader(records);
  c.VisitState(loader);
  EXPECT_EQ(loader.Finish().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(loader.Finish().message(),
            "field 'fc1.weight%2Fpart/loss' is missing from the checkpoint (this run has it)");
}

TEST(StateVisitor, AnotherTypeIsNamed) {
  StateRecords records = SavedComponent();
  records["counter"].type = StateType::kI64;
  Component c;
  StateLoader loader(records);
  c.VisitState(loader);
  EXPECT_EQ(loader.Finish().message(),
            "field 'counter' is i64 in the checkpoint, this run has u64");
}

TEST(StateVisitor, AnotherSizeOfAFixedBufferIsNamedAndLeavesTheBuffer) {
  StateRecords records = SavedComponent();
  Component c;
  c.fixed = {9.0f, 9.0f};  // this run's buffer has 2 values, the checkpoint 3
  StateLoader loader(records);
  c.VisitState(loader);
  EXPECT_EQ(loader.Finish().message(),
            "field 'fc1.weight%2Fpart/fixed' holds 3 values in the checkpoint, this run has 2");
  EXPECT_EQ(c.fixed, (std::vector<float>{9.0f, 9.0f}));
  // Visits after the first error change nothing.
  EXPECT_TRUE(c.sized.empty());
}

TEST(StateVisitor, AFieldNobodyUsesIsAnError) {
  StateRecords records = SavedComponent();
  StateSaver extra;
  uint64_t v = 3;
  extra.U64("compressor/fc2.weight/ef", v);
  records.insert(extra.records().begin(), extra.records().end());
  Component c;
  StateLoader loader(records);
  c.VisitState(loader);
  EXPECT_EQ(loader.Finish().message(),
            "field 'compressor/fc2.weight/ef' of the checkpoint is not used by this run");
}

TEST(StateVisitor, LazyStateIsHandedOverAsASubtreeAndSavedBack) {
  // A context that creates per-tensor state on demand: on load it lists the saved tensors and
  // keeps their records until it creates them.
  StateSaver saver;
  {
    StateVisitor::Scope scope(saver, "ctx");
    for (std::string tensor : {"conv/w", "fc.b"}) {
      StateVisitor::Scope t(saver, tensor);
      std::vector<float> residual = {static_cast<float>(tensor.size())};
      saver.FloatVector("residual", residual);
    }
  }
  StateLoader loader(saver.records());
  std::vector<std::string> children;
  StateRecords conv;
  {
    StateVisitor::Scope scope(loader, "ctx");
    children = loader.Children();
    EXPECT_TRUE(loader.Has("conv/w"));
    EXPECT_FALSE(loader.Has("conv"));
    StateVisitor::Scope t(loader, "conv/w");
    conv = loader.TakeSubtree();
  }
  EXPECT_EQ(children, (std::vector<std::string>{"conv/w", "fc.b"}));
  ASSERT_EQ(conv.size(), 1u);
  EXPECT_EQ(conv.begin()->first, "residual");
  // The other tensor was not taken.
  EXPECT_EQ(loader.Finish().message(),
            "field 'ctx/fc.b/residual' of the checkpoint is not used by "
            "this run");

  // A context saved before it created the state saves the pending records back unchanged.
  StateSaver again;
  {
    StateVisitor::Scope scope(again, "ctx");
    StateVisitor::Scope t(again, "conv/w");
    again.PutSubtree(conv);
  }
  EXPECT_EQ(again.records().at("ctx/conv%2Fw/residual"),
            saver.records().at("ctx/conv%2Fw/residual"));
}

}  // namespace
}  // namespace frugal
