set terminal pngcairo noenhanced size 900,560 font 'DejaVu Sans,11'
set datafile missing '?'
set grid
set key bottom right
set ylabel 'test accuracy (%)'
set output '/tmp/sign_lr/accuracy_vs_epoch_all.png'
set title 'sign_lr'
set xlabel 'epoch'
unset logscale x
plot '/tmp/sign_lr/plots/all_0.dat' using 1:2 with linespoints lw 2 pt 1 title 'sign_lr1e-3', \
     '/tmp/sign_lr/plots/all_1.dat' using 1:2 with linespoints lw 2 pt 2 title 'signum_m0_lr1e-3', \
     '/tmp/sign_lr/plots/all_2.dat' using 1:2 with linespoints lw 2 pt 3 title 'sign_lr1e-4', \
     '/tmp/sign_lr/plots/all_3.dat' using 1:2 with linespoints lw 2 pt 4 title 'signum_m0_lr1e-4', \
     '/tmp/sign_lr/plots/all_4.dat' using 1:2 with linespoints lw 2 pt 5 title 'randomk_ef_wm'
set output '/tmp/sign_lr/accuracy_vs_time_all.png'
set title 'sign_lr'
set xlabel 'wall time (s)'
unset logscale x
plot '/tmp/sign_lr/plots/all_0.dat' using 3:2 with linespoints lw 2 pt 1 title 'sign_lr1e-3', \
     '/tmp/sign_lr/plots/all_1.dat' using 3:2 with linespoints lw 2 pt 2 title 'signum_m0_lr1e-3', \
     '/tmp/sign_lr/plots/all_2.dat' using 3:2 with linespoints lw 2 pt 3 title 'sign_lr1e-4', \
     '/tmp/sign_lr/plots/all_3.dat' using 3:2 with linespoints lw 2 pt 4 title 'signum_m0_lr1e-4', \
     '/tmp/sign_lr/plots/all_4.dat' using 3:2 with linespoints lw 2 pt 5 title 'randomk_ef_wm'
set output '/tmp/sign_lr/accuracy_vs_bytes_all.png'
set title 'sign_lr'
set xlabel 'MB sent per worker'
unset logscale x
plot '/tmp/sign_lr/plots/all_0.dat' using 4:2 with linespoints lw 2 pt 1 title 'sign_lr1e-3', \
     '/tmp/sign_lr/plots/all_1.dat' using 4:2 with linespoints lw 2 pt 2 title 'signum_m0_lr1e-3', \
     '/tmp/sign_lr/plots/all_2.dat' using 4:2 with linespoints lw 2 pt 3 title 'sign_lr1e-4', \
     '/tmp/sign_lr/plots/all_3.dat' using 4:2 with linespoints lw 2 pt 4 title 'signum_m0_lr1e-4', \
     '/tmp/sign_lr/plots/all_4.dat' using 4:2 with linespoints lw 2 pt 5 title 'randomk_ef_wm'
