// The verifier messages of plugins' functions, which need the plugin loaded:
// research_plugin.py runs this with energy-opt --plugin (the research
// plugin: softsign, element-wise with derivatives of orders 0 to 2;
// student_t, a similarity).

energy.model @m {
  energy.dim @N
  energy.tensor @x : state [@N]
  energy.term @e {
    %x = energy.read @x : !energy.array<N>
    // expected-error @below {{'energy.apply' op asks for derivative 3 of 'softsign', whose plugin gives orders 0 to 2}}
    %y = energy.apply "softsign"[3] %x : !energy.array<N>
    %s = energy.reduce_elements sum %y : !energy.array<N>
    energy.yield %s : !energy.array<>
  }
}

// -----

energy.model @m {
  energy.dim @N
  energy.dim @D
  energy.tensor @x : state [@N, @D]
  energy.term @e {
    %x = energy.read @x : !energy.array<N, D>
    // expected-error @below {{'energy.similarity' op expects vectors, found [N, D]}}
    %s = energy.similarity "student_t" %x, %x : !energy.array<N, D>
    energy.yield %s : !energy.array<>
  }
}

// -----

energy.model @m {
  energy.dim @N
  energy.tensor @x : state [@N]
  energy.term @e {
    %x = energy.read @x : !energy.array<N>
    // expected-error @below {{'energy.similarity_gradient' op argument must be 0 or 1, not 2}}
    %g = energy.similarity_gradient "student_t"[2] %x, %x : !energy.array<N>
    %s = energy.reduce_elements sum %g : !energy.array<N>
    energy.yield %s : !energy.array<>
  }
}
