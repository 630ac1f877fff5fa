// Compiled with only the public include path: proves <mixprec/mixprec.h> is enough for a user.
#include <mixprec/mixprec.h>

int main() {
  namespace mp = mixprec;
  auto a = mp::ones({2, 3});
  auto b = mp::full({2, 3}, 2.0);
  auto c = mp::sum(a * b);
  return c.item() == 12.0 ? 0 : 1;
}
