set terminal pngcairo noenhanced size 900,560 font 'DejaVu Sans,11'
set datafile missing '?'
set grid
set key bottom right
set ylabel 'test accuracy (%)'
set output 'docs/results/straggler/accuracy_vs_epoch_all.png'
set title 'straggler'
set xlabel 'epoch'
unset logscale x
plot 'docs/results/straggler/plots/all_0.dat' using 1:2 with linespoints lw 2 pt 1 title 'bsp', \
     'docs/results/straggler/plots/all_1.dat' using 1:2 with linespoints lw 2 pt 2 title 'bsp_straggler', \
     'docs/results/straggler/plots/all_2.dat' using 1:2 with linespoints lw 2 pt 3 title 'local_8', \
     'docs/results/straggler/plots/all_3.dat' using 1:2 with linespoints lw 2 pt 4 title 'local_8_straggler'
set output 'docs/results/straggler/accuracy_vs_time_all.png'
set title 'straggler'
set xlabel 'wall time (s)'
unset logscale x
plot 'docs/results/straggler/plots/all_0.dat' using 3:2 with linespoints lw 2 pt 1 title 'bsp', \
     'docs/results/straggler/plots/all_1.dat' using 3:2 with linespoints lw 2 pt 2 title 'bsp_straggler', \
     'docs/results/straggler/plots/all_2.dat' using 3:2 with linespoints lw 2 pt 3 title 'local_8', \
     'docs/results/straggler/plots/all_3.dat' using 3:2 with linespoints lw 2 pt 4 title 'local_8_straggler'
set output 'docs/results/straggler/accuracy_vs_bytes_all.png'
set title 'straggler'
set xlabel 'MB sent per worker'
unset logscale x
plot 'docs/results/straggler/plots/all_0.dat' using 4:2 with linespoints lw 2 pt 1 title 'bsp', \
     'docs/results/straggler/plots/all_1.dat' using 4:2 with linespoints lw 2 pt 2 title 'bsp_straggler', \
     'docs/results/straggler/plots/all_2.dat' using 4:2 with linespoints lw 2 pt 3 title 'local_8', \
     'docs/results/straggler/plots/all_3.dat' using 4:2 with linespoints lw 2 pt 4 title 'local_8_straggler'
