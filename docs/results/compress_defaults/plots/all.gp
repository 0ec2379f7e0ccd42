set terminal pngcairo noenhanced size 900,560 font 'DejaVu Sans,11'
set datafile missing '?'
set grid
set key bottom right
set ylabel 'test accuracy (%)'
set output 'docs/results/compress_defaults/accuracy_vs_epoch_all.png'
set title 'compress_defaults'
set xlabel 'epoch'
unset logscale x
plot 'docs/results/compress_defaults/plots/all_0.dat' using 1:2 with linespoints lw 2 pt 1 title 'dense', \
     'docs/results/compress_defaults/plots/all_1.dat' using 1:2 with linespoints lw 2 pt 2 title 'bf16', \
     'docs/results/compress_defaults/plots/all_2.dat' using 1:2 with linespoints lw 2 pt 3 title 'minmax8', \
     'docs/results/compress_defaults/plots/all_3.dat' using 1:2 with linespoints lw 2 pt 4 title 'natural', \
     'docs/results/compress_defaults/plots/all_4.dat' using 1:2 with linespoints lw 2 pt 5 title 'sign', \
     'docs/results/compress_defaults/plots/all_5.dat' using 1:2 with linespoints lw 2 pt 6 title 'signum', \
     'docs/results/compress_defaults/plots/all_6.dat' using 1:2 with linespoints lw 2 pt 7 title 'randomk', \
     'docs/results/compress_defaults/plots/all_7.dat' using 1:2 with linespoints lw 2 pt 8 title 'threshold', \
     'docs/results/compress_defaults/plots/all_8.dat' using 1:2 with linespoints lw 2 pt 9 title 'adaptive', \
     'docs/results/compress_defaults/plots/all_9.dat' using 1:2 with linespoints lw 2 pt 10 title 'sbc', \
     'docs/results/compress_defaults/plots/all_10.dat' using 1:2 with linespoints lw 2 pt 11 title 'stc', \
     'docs/results/compress_defaults/plots/all_11.dat' using 1:2 with linespoints lw 2 pt 12 title 'polar'
set output 'docs/results/compress_defaults/accuracy_vs_time_all.png'
set title 'compress_defaults'
set xlabel 'wall time (s)'
unset logscale x
plot 'docs/results/compress_defaults/plots/all_0.dat' using 3:2 with linespoints lw 2 pt 1 title 'dense', \
     'docs/results/compress_defaults/plots/all_1.dat' using 3:2 with linespoints lw 2 pt 2 title 'bf16', \
     'docs/results/compress_defaults/plots/all_2.dat' using 3:2 with linespoints lw 2 pt 3 title 'minmax8', \
     'docs/results/compress_defaults/plots/all_3.dat' using 3:2 with linespoints lw 2 pt 4 title 'natural', \
     'docs/results/compress_defaults/plots/all_4.dat' using 3:2 with linespoints lw 2 pt 5 title 'sign', \
     'docs/results/compress_defaults/plots/all_5.dat' using 3:2 with linespoints lw 2 pt 6 title 'signum', \
     'docs/results/compress_defaults/plots/all_6.dat' using 3:2 with linespoints lw 2 pt 7 title 'randomk', \
     'docs/results/compress_defaults/plots/all_7.dat' using 3:2 with linespoints lw 2 pt 8 title 'threshold', \
     'docs/results/compress_defaults/plots/all_8.dat' using 3:2 with linespoints lw 2 pt 9 title 'adaptive', \
     'docs/results/compress_defaults/plots/all_9.dat' using 3:2 with linespoints lw 2 pt 10 title 'sbc', \
     'docs/results/compress_defaults/plots/all_10.dat' using 3:2 with linespoints lw 2 pt 11 title 'stc', \
     'docs/results/compress_defaults/plots/all_11.dat' using 3:2 with linespoints lw 2 pt 12 title 'polar'
set output 'docs/results/compress_defaults/accuracy_vs_bytes_all.png'
set title 'compress_defaults'
set xlabel 'MB sent per worker'
set logscale x
plot 'docs/results/compress_defaults/plots/all_0.dat' using 4:2 with linespoints lw 2 pt 1 title 'dense', \
     'docs/results/compress_defaults/plots/all_1.dat' using 4:2 with linespoints lw 2 pt 2 title 'bf16', \
     'docs/results/compress_defaults/plots/all_2.dat' using 4:2 with linespoints lw 2 pt 3 title 'minmax8', \
     'docs/results/compress_defaults/plots/all_3.dat' using 4:2 with linespoints lw 2 pt 4 title 'natural', \
     'docs/results/compress_defaults/plots/all_4.dat' using 4:2 with linespoints lw 2 pt 5 title 'sign', \
     'docs/results/compress_defaults/plots/all_5.dat' using 4:2 with linespoints lw 2 pt 6 title 'signum', \
     'docs/results/compress_defaults/plots/all_6.dat' using 4:2 with linespoints lw 2 pt 7 title 'randomk', \
     'docs/results/compress_defaults/plots/all_7.dat' using 4:2 with linespoints lw 2 pt 8 title 'threshold', \
     'docs/results/compress_defaults/plots/all_8.dat' using 4:2 with linespoints lw 2 pt 9 title 'adaptive', \
     'docs/results/compress_defaults/plots/all_9.dat' using 4:2 with linespoints lw 2 pt 10 title 'sbc', \
     'docs/results/compress_defaults/plots/all_10.dat' using 4:2 with linespoints lw 2 pt 11 title 'stc', \
     'docs/results/compress_defaults/plots/all_11.dat' using 4:2 with linespoints lw 2 pt 12 title 'polar'
